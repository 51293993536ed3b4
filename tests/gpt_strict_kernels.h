/* gpt_strict_kernels.h - examples/gpt_kernels.h's kernels registered with the
   strict CUDA + NCCL stand-in (tests/strict/vs_strict.h): their declarations
   (gpt_kernel_decls: arguments, flops and bytes) give the stand-in's table and
   clock, and it runs each launch as the text's host function, the host build in
   the device's block order (GPT_K_HOST_DEVICE_ORDER), which is what a GPU
   computes except where its expf / tanhf / logf round apart.
   Include after examples/gpt_kernels.h and strict/vs_strict.h; call
   gpt_strict_register() once before the first launch. */
#ifndef GPT_STRICT_KERNELS_H
#define GPT_STRICT_KERNELS_H

static void gpt_strict_register(void) { vs_strict_add_text(&gpt_kernel_text); }

#endif // GPT_STRICT_KERNELS_H
