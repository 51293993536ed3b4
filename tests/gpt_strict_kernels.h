/* gpt_strict_kernels.h - examples/gpt_kernels.h's kernels registered with the
   strict CUDA + NCCL stand-in (tests/strict/vs_strict.h): it runs each launch
   as the kernel's host build in the device's block order (GPT_K_HOST_DEVICE_ORDER),
   which is what a GPU computes except where its expf / tanhf / logf round apart.
   Include after examples/gpt_kernels.h and strict/vs_strict.h; call
   gpt_strict_register() once before the first launch. */
#ifndef GPT_STRICT_KERNELS_H
#define GPT_STRICT_KERNELS_H

#define GPT__STK(i) \
    static void gpt__stk_##i(void** a, dim3 g, dim3 b) \
    { \
        (void)g, (void)b; \
        gpt_kernel_host(i, a, 1); \
    }
GPT__STK(0) GPT__STK(1) GPT__STK(2) GPT__STK(3) GPT__STK(4) GPT__STK(5) GPT__STK(6) GPT__STK(7) GPT__STK(8)
GPT__STK(9) GPT__STK(10) GPT__STK(11) GPT__STK(12) GPT__STK(13) GPT__STK(14) GPT__STK(15)
#undef GPT__STK

static void gpt_strict_register(void)
{
    static void (*const run[])(void**, dim3, dim3) = {
        gpt__stk_0, gpt__stk_1, gpt__stk_2,  gpt__stk_3,  gpt__stk_4,  gpt__stk_5,  gpt__stk_6,  gpt__stk_7,
        gpt__stk_8, gpt__stk_9, gpt__stk_10, gpt__stk_11, gpt__stk_12, gpt__stk_13, gpt__stk_14, gpt__stk_15};
    static st_ksig sigs[GPT_KI_N + 1];
    typedef char gpt__stk_all[sizeof run / sizeof run[0] == GPT_KI_N ? 1 : -1]; // one runner per kernel
    (void)sizeof(gpt__stk_all);
    for (int k = 0; k < GPT_KI_N; k++) {
        st_ksig* s = &sigs[k];
        const char* a = gpt_kernel_args[k];
        s->name = gpt_kernel_names[k], s->run = run[k];
        s->nargs = (int)strlen(a);
        for (int i = 0; i < s->nargs; i++) {
            s->size[i] = a[i] == 'i' ? (int)sizeof(int) : a[i] == 'l' ? (int)sizeof(long long) : (int)sizeof(void*);
            if (a[i] == 'w' || a[i] == 'r') s->ptr |= 1u << i;
            if (a[i] == 'w') s->wr |= 1u << i;
        }
    }
    vs_strict_add_kernels(sigs);
}

#endif // GPT_STRICT_KERNELS_H
