/* bench/rank_bytes.h - the library's host bytes a rank thread: allocator hooks
   (vs_launch_desc.allocator) that charge each block to the thread that
   allocated it (rb_acct, set by the rank's function on entry; other threads'
   blocks to rb_other) and its free to the same account, whichever thread frees
   it. A block's header keeps its size and its account. Used by
   bench/ckpt_meta.c and tests/test_ckpt_scale.c. */
#ifndef VS_RANK_BYTES_H
#define VS_RANK_BYTES_H
#include <stdlib.h>
#include <string.h>

typedef struct rb_account {
    size_t live, peak; // bytes held now, and at most since the peak was last reset
} rb_account;
static rb_account rb_other;
static __thread rb_account* rb_acct;
enum { RB_HDR = 16 };

static void* rb_alloc(size_t n, void* user)
{
    (void)user;
    rb_account* a = rb_acct ? rb_acct : &rb_other;
    char* p = (char*)malloc(n + RB_HDR);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    memcpy(p + sizeof n, &a, sizeof a);
    size_t now = __atomic_add_fetch(&a->live, n, __ATOMIC_RELAXED), pk = __atomic_load_n(&a->peak, __ATOMIC_RELAXED);
    while (now > pk && !__atomic_compare_exchange_n(&a->peak, &pk, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return p + RB_HDR;
}

static void rb_free(void* p, void* user)
{
    (void)user;
    if (!p) return;
    size_t n;
    rb_account* a;
    memcpy(&n, (char*)p - RB_HDR, sizeof n);
    memcpy(&a, (char*)p - RB_HDR + sizeof n, sizeof a);
    __atomic_sub_fetch(&a->live, n, __ATOMIC_RELAXED);
    free((char*)p - RB_HDR);
}

/* The calling rank thread's bytes now; its peak starts again from them. */
static size_t rb_mark(void)
{
    size_t base = __atomic_load_n(&rb_acct->live, __ATOMIC_RELAXED);
    __atomic_store_n(&rb_acct->peak, base, __ATOMIC_RELAXED);
    return base;
}

/* Its peak since rb_mark, above base. */
static size_t rb_since(size_t base) { return __atomic_load_n(&rb_acct->peak, __ATOMIC_RELAXED) - base; }
#endif
