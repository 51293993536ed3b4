/* tests/strict/vs_strict_race.h - the missing-wait detector of the strict
   stand-in (included by tests/strict/vs_strict.h; see its top comment): a
   happens-before checker over streams with vector clocks.

   Every stream is a clock; its n-th operation to start has the epoch
   (stream, n). An operation's vector clock is the join of
   - the previous operation's on its stream (stream order),
   - the enqueuing host thread's clock when it was enqueued,
   - the clock of what it waits for: an event (cudaStreamWaitEvent, the clock
     of the operation cudaEventRecord enqueued) or the legacy stream's
     implicit synchronisation (the last operation of the other stream),
   - and, for an NCCL collective, every participant's (once all have arrived).
   A host thread's clock joins the clock of what it waited for:
   cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize,
   cudaMalloc/cudaFree (they synchronise the device), a query that answered
   cudaSuccess, a synchronous copy. Host threads do not order each other
   (pthread_create, mutexes: not seen), and send/recv do not order their ranks.

   Accesses are kept per device allocation as byte ranges: copies and memsets
   know theirs, collectives theirs (count x the dtype's size, per kind), kernels
   their pointer arguments' (what the kernel's declaration states, vescale_mesh.h's
   vs_kernel_cost off/len, or a test's st_ksig range function; else from the
   pointer to the end of its allocation; the declaration's argument letters, or
   st_ksig's write mask, say which ones are written). A write must happen after the last write and the
   reads since of every byte it touches, a read after the last write: else
   "VIOLATION missing-wait". The check is by clock, not by timing: a missing
   wait is reported whichever way the streams ran. All of it under st_mu. */

#ifndef VS_STRICT_RACE_H
#define VS_STRICT_RACE_H

/* A vector clock is kept in chunks of ST_VCW consecutive stream ids, each chunk
   shared, counted and copied on write: an event's clock, an operation's and its
   stream's differ in a few chunks and share the rest. Dense clocks of an entry
   per stream ever made were held by every event (the library's pooled ones,
   each keeping its last recording's): at 1,024 ranks, ~12,000 stream ids x
   4 B x ~150,000 clocks, the host memory that grew every step until the run
   was killed (at 11 GiB). */
enum { ST_VCW = 64 };
typedef struct st_vchunk {
    int refs; /* the clocks that hold it */
    unsigned c[ST_VCW];
} st_vchunk;

typedef struct st_vc { /* a vector clock, indexed by stream id; shared, counted */
    int refs, n;       /* n: chunks (entries n x ST_VCW) */
    st_vchunk** ch;    /* NULL: all zero */
} st_vc;

typedef struct st_rrec { /* one access to a range of an allocation */
    size_t lo, hi;       /* arena offsets */
    int wr;
    long sid;            /* stream id; the epoch is (sid, clk) */
    unsigned clk;
    const char* what;    /* the operation's name (static) */
} st_rrec;

typedef struct st_rset {
    int n, cap;
    st_rrec* r;
} st_rset;

typedef struct st_host { /* a host thread: what it has waited for */
    st_vc* vc;
    struct st_host* next;
} st_host;

static st_host* st_hosts; /* every host thread seen (kept: reachable) */
static __thread st_host* st_me;

static st_vc* st_vc_new(void) { return (st_vc*)calloc(1, sizeof(st_vc)); }

static st_vc* st_vc_ref(st_vc* v)
{
    if (v) v->refs++;
    return v;
}

static void st_vchunk_unref(st_vchunk* k)
{
    if (k && --k->refs == 0) free(k);
}

static void st_vc_unref(st_vc* v)
{
    if (v && --v->refs < 0) {
        for (int k = 0; k < v->n; k++) st_vchunk_unref(v->ch[k]);
        free(v->ch);
        free(v);
    }
}

static unsigned st_vc_get(const st_vc* v, long i)
{
    long k = i / ST_VCW;
    return v && k < v->n && v->ch[k] ? v->ch[k]->c[i % ST_VCW] : 0;
}

static void st_vc_grow(st_vc* v, int n)
{
    if (n <= v->n) return;
    v->ch = (st_vchunk**)realloc(v->ch, sizeof(st_vchunk*) * (size_t)n);
    memset(v->ch + v->n, 0, sizeof(st_vchunk*) * (size_t)(n - v->n));
    v->n = n;
}

/* v's chunk k, its own (copied when another clock holds it too) */
static st_vchunk* st_vc_own(st_vc* v, int k)
{
    st_vchunk* o = v->ch[k];
    if (o && o->refs == 1) return o;
    st_vchunk* c = (st_vchunk*)calloc(1, sizeof *c);
    c->refs = 1;
    if (o) memcpy(c->c, o->c, sizeof c->c), st_vchunk_unref(o);
    return v->ch[k] = c;
}

/* v[i] = x, for x above v[i] */
static void st_vc_raise(st_vc* v, int i, unsigned x)
{
    st_vc_grow(v, i / ST_VCW + 1);
    st_vc_own(v, i / ST_VCW)->c[i % ST_VCW] = x;
}

static void st_vc_join(st_vc* d, const st_vc* s)
{
    if (!s) return;
    st_vc_grow(d, s->n);
    for (int k = 0; k < s->n; k++) {
        st_vchunk *sc = s->ch[k], *dc = d->ch[k];
        if (!sc || sc == dc) continue;
        int above = 0, below = 0; /* s's entries above d's, below */
        for (int j = 0; j < ST_VCW; j++) {
            unsigned a = sc->c[j], b = dc ? dc->c[j] : 0;
            above |= a > b, below |= a < b;
        }
        if (!above) continue;
        if (!below) { /* s's chunk covers d's: shared */
            sc->refs++;
            st_vchunk_unref(dc);
            d->ch[k] = sc;
            continue;
        }
        dc = st_vc_own(d, k);
        for (int j = 0; j < ST_VCW; j++)
            if (sc->c[j] > dc->c[j]) dc->c[j] = sc->c[j];
    }
}

static st_host* st_host_locked(void)
{
    if (!st_me) {
        st_me = (st_host*)calloc(1, sizeof *st_me);
        st_me->next = st_hosts, st_hosts = st_me;
    }
    return st_me;
}

/* The clock an operation will have once it starts (its cell: filled at start). */
static st_vc* st_race_cell_locked(st_op* op)
{
    if (!op->rvc) op->rvc = st_vc_new();
    return st_vc_ref(op->rvc);
}

/* What waiting for stream s's last enqueued operation orders the waiter after. */
static st_vc* st_race_target_locked(struct CUstream_st* s)
{
    if (s->enq > s->done && s->tail) return st_race_cell_locked(s->tail);
    return st_vc_ref(s->vc);
}

/* Whether this host thread's clock already covers all that stream s ran: s idle
   and the epoch of its last operation known to the thread (a clock that holds an
   operation's epoch holds its whole clock), so a join would change nothing.
   There is a clock entry per stream ever made, and a device-wide wait (cudaMalloc,
   cudaFree) joined every stream's clock, most of them long idle. */
static int st_race_host_covers_locked(struct CUstream_st* s)
{
    st_host* h = st_host_locked();
    return s->enq == s->done && s->vc && h->vc && st_vc_get(h->vc, s->id) >= st_vc_get(s->vc, s->id);
}

/* A host wait for v ended: the thread's clock joins it (copied first when an
   enqueued operation still holds the old one). Drops the reference to v. */
static void st_race_host_merge_locked(st_vc* v)
{
    if (!v) return;
    st_host* h = st_host_locked();
    if (!h->vc || h->vc->refs > 0) {
        st_vc* nv = st_vc_new();
        st_vc_join(nv, h->vc);
        st_vc_unref(h->vc);
        h->vc = nv;
    }
    st_vc_join(h->vc, v);
    st_vc_unref(v);
}

/* ---- what the host knows complete (host_syncs' "seen", vs_strict.h) --------------

   An operation's completion clock: the operations (stream id -> position) whose
   completion its own completion proves, over the edges that order completions:
   stream order and a stream's waits (cudaStreamWaitEvent on an event's recorded
   operation, the legacy stream's implicit waits), each joining its target's
   completion clock; a collective's peers are left out (their operations may still
   run when this one completes). Filled when the operation starts (as its clock
   is), from the cells its waits captured when it was enqueued: exact, whatever
   the timing. When the host sees an operation complete (a sync, a query that
   answered cudaSuccess), every stream's `known` position joins its completion
   clock, so a later non-blocking query of work before it costs no host sync. */
static st_vc* st_comp_cell_locked(st_op* op)
{
    if (!op->cvc) op->cvc = st_vc_new();
    return st_vc_ref(op->cvc);
}

/* The completion clock of stream s's last enqueued operation (a reference). */
static st_vc* st_comp_target_locked(struct CUstream_st* s)
{
    if (s->enq > s->done && s->tail) return st_comp_cell_locked(s->tail);
    return st_vc_ref(s->cvc);
}

/* cudaStreamWaitEvent's operation: its wait (the last one added) proves what the
   event's operation does (an empty clock: an event recorded before any work). */
static void st_comp_wait_event_locked(st_op* op, struct CUevent_st* ev)
{
    if (op->nwait > 0) op->cwvc[op->nwait - 1] = ev->cvc ? st_vc_ref(ev->cvc) : st_vc_new();
}

/* The host saw done an operation of completion clock cv (a reference, dropped). */
static void st_seen_comp_locked(st_vc* cv)
{
    if (!cv) return;
    for (int k = 0; k < cv->n; k++)
        for (int j = 0; cv->ch[k] && j < ST_VCW; j++) {
            int i = k * ST_VCW + j;
            struct CUstream_st* q = i < st_nbyid ? st_byid[i] : NULL;
            if (q && (long)cv->ch[k]->c[j] > q->known) q->known = (long)cv->ch[k]->c[j];
        }
    st_vc_unref(cv);
}

/* An operation enqueued on s: it inherits the host thread's clock, and the
   legacy stream's implicit waits (those without an event's clock) wait for
   the other stream's last operation. */
static void st_race_push_locked(struct CUstream_st* s, st_op* op)
{
    (void)s;
    op->hvc = st_vc_ref(st_host_locked()->vc);
    for (int i = 0; i < op->nwait; i++) {
        if (!op->wvc[i] && op->ws[i]->tail) op->wvc[i] = st_race_cell_locked(op->ws[i]->tail);
        if (!op->cwvc[i] && op->ws[i]->tail) op->cwvc[i] = st_comp_cell_locked(op->ws[i]->tail);
    }
}

static void st_race_op_free_locked(st_op* op)
{
    st_vc_unref(op->rvc);
    st_vc_unref(op->hvc);
    st_vc_unref(op->cvc);
    for (int i = 0; i < op->nwait; i++) st_vc_unref(op->wvc[i]), st_vc_unref(op->cwvc[i]);
}

static void st_race_event_record_locked(struct CUevent_st* ev, struct CUstream_st* s)
{
    st_vc_unref(ev->vc);
    ev->vc = st_race_target_locked(s);
    st_vc_unref(ev->cvc);
    ev->cvc = st_comp_target_locked(s);
}

/* cudaStreamWaitEvent's operation (its wait on ev is the last one added). */
static void st_race_wait_event_locked(st_op* op, struct CUevent_st* ev)
{
    if (op->nwait > 0) op->wvc[op->nwait - 1] = st_vc_ref(ev->vc);
}

static void st_race_free_locked(st_alloc* a)
{
    if (a->race) free(a->race->r);
    free(a->race);
    a->race = NULL;
}

/* ---- the access check ------------------------------------------------------------ */

static void st_rset_add(st_rset* rs, st_rrec r)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 8;
        rs->r = (st_rrec*)realloc(rs->r, sizeof(st_rrec) * (size_t)rs->cap);
    }
    rs->r[rs->n++] = r;
}

/* Takes [lo, hi) out of record i (up to two pieces stay). */
static void st_rset_cut(st_rset* rs, int i, size_t lo, size_t hi)
{
    st_rrec r = rs->r[i];
    rs->r[i] = rs->r[--rs->n];
    if (r.lo < lo) {
        st_rrec a = r;
        a.hi = lo;
        st_rset_add(rs, a);
    }
    if (r.hi > hi) {
        st_rrec b = r;
        b.lo = hi;
        st_rset_add(rs, b);
    }
}

/* Operation `what` (epoch sid/clk, clock v) on stream s accesses bytes
   [p + off, p + off + bytes) (bytes (size_t)-1: to its allocation's end). */
static void st_race_access_locked(struct CUstream_st* s, const st_vc* v, unsigned clk, const char* what, const void* p,
                                  size_t off, size_t bytes, int wr)
{
    st_alloc* a = p ? st_find_locked(p, 0) : NULL;
    if (!a || !bytes) return;
    size_t end = a->off + a->n, lo = (size_t)((const char*)p - st_dbase) + off;
    if (lo >= end) return;
    size_t hi = bytes == (size_t)-1 || bytes > end - lo ? end : lo + bytes;
    if (!a->race) a->race = (st_rset*)calloc(1, sizeof(st_rset));
    st_rset* rs = a->race;
    for (int i = 0; i < rs->n; i++) {
        st_rrec* r = &rs->r[i];
        if (r->hi <= lo || r->lo >= hi || (!wr && !r->wr) || st_vc_get(v, r->sid) >= r->clk) continue;
        size_t clo = r->lo > lo ? r->lo : lo, chi = r->hi < hi ? r->hi : hi;
        st_violation("missing-wait",
                     "%s on stream %ld (device %d) %s bytes [%zu, %zu) of the %zu-byte device allocation at %p, last %s "
                     "by %s on stream %ld, with no event wait between",
                     what, s->id, s->dev, wr ? "writes" : "reads", clo - a->off, chi - a->off, a->n,
                     (void*)(st_dbase + a->off), r->wr ? "written" : "read", r->what, r->sid);
        break; /* one report per access */
    }
    for (int i = rs->n - 1; i >= 0; i--) { /* what this access makes redundant */
        st_rrec* r = &rs->r[i];
        if (r->hi <= lo || r->lo >= hi) continue;
        if (wr || (!r->wr && st_vc_get(v, r->sid) >= r->clk)) st_rset_cut(rs, i, lo, hi);
    }
    st_rrec nr = {lo, hi, wr, s->id, clk, what};
    st_rset_add(rs, nr);
}

static void st_copy_run(struct CUstream_st* s, st_op* op);
static void st_set_run(struct CUstream_st* s, st_op* op);
static void st_kernel_run(struct CUstream_st* s, st_op* op);
static void st_nccl_run(struct CUstream_st* s, st_op* op);
struct st_inst;
static void st_race_nccl_locked(struct CUstream_st* s, st_op* op, const st_vc* v, unsigned clk);
static void st_race_coll_arrive_locked(struct st_inst* in, st_op* op);
static void st_race_coll_leave_locked(struct st_inst* in, st_op* op);
static void st_race_inst_free_locked(struct st_inst* in);

/* The stand-in's view of an address back to the program's. */
static const void* st_race_dev(const void* p)
{
    const char* c = (const char*)p;
    if (st_sbase && c >= st_sbase && c < st_sbase + st_arena) return st_dbase + (c - st_sbase);
    return p;
}

/* Operation op starts on s (its waits are over): its clock, then its accesses. */
static void st_race_start_locked(struct CUstream_st* s, st_op* op)
{
    if (!op->rvc) op->rvc = st_vc_new();
    st_vc* v = op->rvc;
    st_vc_join(v, s->vc);
    st_vc_join(v, op->hvc);
    for (int i = 0; i < op->nwait; i++) st_vc_join(v, op->wvc[i]);
    unsigned clk = ++s->clk;
    st_vc_raise(v, (int)s->id, clk);
    st_vc_unref(s->vc);
    s->vc = st_vc_ref(v);
    if (!op->cvc) op->cvc = st_vc_new(); /* its completion clock (st_comp_cell_locked) */
    st_vc* cv = op->cvc;
    st_vc_join(cv, s->cvc);
    for (int i = 0; i < op->nwait; i++) st_vc_join(cv, op->cwvc[i]);
    st_vc_raise(cv, (int)s->id, clk);
    st_vc_unref(s->cvc);
    s->cvc = st_vc_ref(cv);
    if (op->fn == st_copy_run) {
        if (!op->staged) st_race_access_locked(s, v, clk, op->what, op->src, 0, op->n, 0);
        st_race_access_locked(s, v, clk, op->what, op->dst, 0, op->n, 1);
    } else if (op->fn == st_set_run) {
        st_race_access_locked(s, v, clk, op->what, op->dst, 0, op->n, 1);
    } else if (op->fn == st_kernel_run && !op->bad) {
        const st_ksig* sig = op->sig;
        void* a[16];
        size_t off[16], bytes[16];
        st_op_args(op, a);
        st_ksig_ranges(sig, a, op->grid, off, bytes);
        for (int pass = 0; pass < 2; pass++) /* reads, then writes */
            for (int i = 0; i < sig->nargs; i++)
                if ((sig->ptr >> i & 1) && (int)(sig->wr >> i & 1) == pass)
                    st_race_access_locked(s, v, clk, sig->name, st_race_dev(*(void**)a[i]), off[i], bytes[i], pass);
    } else if (op->fn == st_nccl_run) {
        st_race_nccl_locked(s, op, v, clk);
    }
}

#elif !defined(VS_STRICT_RACE_NCCL) /* the second include, after vs_strict_nccl.h */
#define VS_STRICT_RACE_NCCL

/* An NCCL operation's accesses: each send buffer read, each receive buffer
   written (the byte counts st_nccl_call worked out). */
static void st_race_nccl_locked(struct CUstream_st* s, st_op* op, const st_vc* v, unsigned clk)
{
    for (st_nop* q = op->nops; q; q = q->next)
        st_race_access_locked(s, v, clk, st_nnames[q->kind], q->sb, 0, q->sbytes, 0);
    for (st_nop* q = op->nops; q; q = q->next)
        st_race_access_locked(s, v, clk, st_nnames[q->kind], q->rb, 0, q->rbytes, 1);
}

/* A collective: each participant's clock joins the instance's on arrival; once
   all have arrived, each participant's operation joins the instance's. */
static void st_race_coll_arrive_locked(st_inst* in, st_op* op)
{
    if (!in->vc) in->vc = st_vc_new();
    st_vc_join(in->vc, op->rvc);
}
static void st_race_coll_leave_locked(st_inst* in, st_op* op)
{
    if (op->rvc) st_vc_join(op->rvc, in->vc);
}

static void st_race_inst_free_locked(st_inst* in) { st_vc_unref(in->vc); }

#endif
