/* bench/rank_bytes.h - the library's allocations counted through its allocator
   hooks: vs_launch_desc.allocator = rb_hooks(&opts), or just rb_alloc and rb_free
   (user an rb_opts or NULL). Include after vescale_mesh.h.

   A block is charged to the allocating thread's account (rb_acct, which a rank's
   function sets on entry) or, without one, to opts->other (NULL: rb_other): one
   account for every thread is `other` with rb_acct unset. Its free goes to the
   same account, whichever thread frees it (a header before the block keeps its
   size and account). Under VS_STRICT rb_hooks counts device blocks too. Used by
   bench/ckpt_meta.c, bench/ddp_memory.c, tests/ddp_common.h,
   tests/test_ckpt_scale.c, tests/test_strict_scale.c and
   tests/test_train_scale.c. */
#ifndef VS_RANK_BYTES_H
#define VS_RANK_BYTES_H
#include <stdlib.h>
#include <string.h>

#define RB_UNUSED __attribute__((unused)) // (tests that include it and count nothing)
typedef struct rb_account {
    size_t live, peak; // bytes held now, and at most since the peak was last reset
    size_t max;        // the largest block
    long n, big, dev;  // blocks allocated; those of rb_opts.big_bytes or more; device blocks
} rb_account;
typedef struct rb_opts {
    size_t min_bytes;  // smaller blocks count nowhere (0: all count)
    size_t big_bytes;  // blocks this large count in .big too (0: none does)
    rb_account* other; // threads without rb_acct (NULL: rb_other)
} rb_opts;
RB_UNUSED static rb_account rb_other;
RB_UNUSED static __thread rb_account* rb_acct;
enum { RB_HDR = 16 };

/* the calling thread's account under opts (NULL-safe) */
RB_UNUSED static rb_account* rb_charged(const rb_opts* o)
{
    return rb_acct ? rb_acct : o && o->other ? o->other : &rb_other;
}

RB_UNUSED static void rb_raise(size_t* at, size_t v)
{
    size_t m = __atomic_load_n(at, __ATOMIC_RELAXED);
    while (v > m && !__atomic_compare_exchange_n(at, &m, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

RB_UNUSED static void* rb_alloc(size_t n, void* user)
{
    const rb_opts* o = (const rb_opts*)user;
    rb_account* a = o && n < o->min_bytes ? NULL : rb_charged(o);
    char* p = (char*)malloc(n + RB_HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    memcpy(p + sizeof n, &a, sizeof a);
    if (a) {
        rb_raise(&a->peak, __atomic_add_fetch(&a->live, n, __ATOMIC_RELAXED));
        rb_raise(&a->max, n);
        __atomic_add_fetch(&a->n, 1, __ATOMIC_RELAXED);
        if (o && o->big_bytes && n >= o->big_bytes) __atomic_add_fetch(&a->big, 1, __ATOMIC_RELAXED);
    }
    return p + RB_HDR;
}

RB_UNUSED static void rb_free(void* p, void* user)
{
    (void)user;
    if (!p) return;
    size_t n;
    rb_account* a;
    memcpy(&n, (char*)p - RB_HDR, sizeof n);
    memcpy(&a, (char*)p - RB_HDR + sizeof n, sizeof a);
    if (a) __atomic_sub_fetch(&a->live, n, __ATOMIC_RELAXED);
    free((char*)p - RB_HDR);
}

#ifdef VS_STRICT
RB_UNUSED static void* rb_device_alloc(size_t n, void* user)
{
    __atomic_add_fetch(&rb_charged((const rb_opts*)user)->dev, 1, __ATOMIC_RELAXED);
    void* p = NULL;
    return cudaMalloc(&p, n) == cudaSuccess ? p : NULL;
}
RB_UNUSED static void rb_device_free(void* p, void* user)
{
    (void)user;
    cudaFree(p);
}
#endif

/* The hooks with opts (kept by the caller while the world lives; NULL: the defaults). */
RB_UNUSED static vs_allocator rb_hooks(rb_opts* opts)
{
    vs_allocator al;
    memset(&al, 0, sizeof al);
    al.alloc = rb_alloc, al.free = rb_free, al.user = opts;
#ifdef VS_STRICT
    al.device_alloc = rb_device_alloc, al.device_free = rb_device_free;
#endif
    return al;
}

/* The calling rank thread's bytes now. */
RB_UNUSED static size_t rb_live(void) { return __atomic_load_n(&rb_acct->live, __ATOMIC_RELAXED); }

/* The calling rank thread's bytes now; its peak starts again from them. */
RB_UNUSED static size_t rb_mark(void)
{
    size_t base = rb_live();
    __atomic_store_n(&rb_acct->peak, base, __ATOMIC_RELAXED);
    return base;
}

/* Its peak since rb_mark, above base. */
RB_UNUSED static size_t rb_since(size_t base) { return __atomic_load_n(&rb_acct->peak, __ATOMIC_RELAXED) - base; }
#endif
