/* tests/strict/vs_strict_nccl.h - the stand-in NCCL of tests/strict/vs_strict.h
   (included by it; see its top comment). Ranks are threads of one process;
   a communicator's operations run on the caller's stream's worker, each
   blocking that stream until its peers arrive, as an NCCL kernel does. A rank's
   abort, revoke or NCCL_SHRINK_ABORT stops its own operations only (st_stopped:
   NCCL's abort flag), as on the GPU; split and shrink meet their ranks' calls
   in an instance per call (st_split), made by the last to arrive. */

typedef struct st_clique st_clique;

struct st_nop {
    int kind; /* ST_N_* */
    struct ncclComm* comm;
    const void* sb; /* device addresses as the program gave them */
    void* rb;
    size_t count;
    int dt, op, peer; /* peer: root for rooted collectives */
    long seq;
    int matched, failed;
    size_t sbytes, rbytes; /* what it reads of sb and writes of rb */
    st_nop *next, *pnext; /* in its fused operation; in the clique's posted p2p list */
    char what[160];
    double t_ready, t0, t1; /* vs_strict_clock.h: when its side could start; a send/recv's start and end */
    int tag;                /* vs_strict_clock.h: its tag (vs_strict_clock_tag) */
};
enum { ST_N_ALLREDUCE, ST_N_REDUCE, ST_N_BCAST, ST_N_ALLGATHER, ST_N_REDSCAT, ST_N_SEND, ST_N_RECV };
static const char* const st_nnames[] = {"ncclAllReduce", "ncclReduce",   "ncclBroadcast", "ncclAllGather",
                                        "ncclReduceScatter", "ncclSend", "ncclRecv"};
typedef char st_nkinds_are_the_clocks[(int)ST_N_ALLREDUCE == (int)VS_STRICT_ALLREDUCE &&
                                              (int)ST_N_REDSCAT == (int)VS_STRICT_REDSCAT &&
                                              (int)ST_N_RECV == (int)VS_STRICT_RECV ? 1 : -1];

typedef struct st_inst { /* one collective of a clique, across its ranks */
    long seq;
    int arrived, left, done;
    int broken; /* a rank's operation stopped (abort, revoke) before the others came: it never runs */
    st_nop** part;
    struct st_inst* next;
    struct st_vc* vc; /* vs_strict_race.h: the participants' clocks joined */
    double t0, t1;    /* vs_strict_clock.h: its start (the latest rank's) and end */
} st_inst;

typedef struct st_split { /* one ncclCommSplit or ncclCommShrink of a clique */
    long seq;
    int arrived, done;
    int *color, *key, *blocking; /* blocking: the child's */
    struct ncclComm*** slot;     /* NULL: that rank has not called (a shrink's excluded ranks never do) */
    int *excl, nexcl, first, failed; /* a shrink: the first caller's sorted exclude list; mismatched lists */
    struct st_split* next;
} st_split;

struct st_clique {
    char id[NCCL_UNIQUE_ID_BYTES];
    int n, joined;
    struct ncclComm** ranks;
    st_inst* insts;
    st_nop* posted; /* send/recv posted, not yet matched */
    st_split *splits, *shrinks;
    st_clique* next;
    /* broadcast when one of its operations completes or a member stops: its streams
       blocked in its operations wait here (on st_cv, every collective's completion
       woke every blocked stream of every clique: at 512 ranks a quarter of a run's
       samples were futex wakes) */
    pthread_cond_t cv;
};

struct ncclComm {
    st_clique* cq;
    int rank, n, dev, blocking;
    long coll_seq, split_seq, *send_seq, *recv_seq;
    ncclResult_t async;
    int aborted, destroyed, finalized;
    int revoked, revoking; /* ncclCommRevoke called; its operations still stopping */
    int halt;              /* ncclCommShrink's NCCL_SHRINK_ABORT stopping them */
    long shrink_seq;
    long pending; /* operations enqueued, not finished */
    struct ncclComm* gnext;
};

static st_clique* st_cliques;
static struct ncclComm* st_comms; /* every communicator ever made: kept, so a late use is reported */
static long st_idctr;
static long st_dev_pend[ST_MAXDEV];
static pthread_t st_dev_tid[ST_MAXDEV];
static __thread int st_gdepth;
static __thread st_nop *st_ghead, *st_gtail;

/* c's operations stop waiting for their peers and end without writing (their
   kernels exit, as NCCL's abort flag makes them): aborted, being revoked, or
   ncclCommShrink's NCCL_SHRINK_ABORT. Only this rank's: a peer still waits. */
static int st_stopped(const struct ncclComm* c) { return c->aborted || c->revoking || c->halt; }
/* c stopped (st_mu held): its streams blocked in its operations wait on its clique's cv */
static void st_stop_wake_locked(struct ncclComm* c)
{
    if (c->cq) pthread_cond_broadcast(&c->cq->cv);
}

/* A revoke is done once c is quiescent: its async state becomes ncclSuccess
   (NCCL's revoke job writes its own result there, an earlier error included). */
static void st_revoke_settle_locked(struct ncclComm* c)
{
    if (c->revoking && !c->pending) c->revoking = 0, c->async = ncclSuccess;
}

static size_t st_nsize(int dt)
{
    switch (dt) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
    }
}

/* ---- arithmetic as NCCL does it -------------------------------------------------- */

static double st_ld(int dt, const void* p, size_t i)
{
    switch (dt) {
    case ncclInt8: return ((const int8_t*)p)[i];
    case ncclUint8: return ((const uint8_t*)p)[i];
    case ncclInt32: return ((const int32_t*)p)[i];
    case ncclUint32: return ((const uint32_t*)p)[i];
    case ncclInt64: return (double)((const int64_t*)p)[i];
    case ncclUint64: return (double)((const uint64_t*)p)[i];
    case ncclFloat16: return vs_f16_to_f32(((const uint16_t*)p)[i]);
    case ncclBfloat16: return vs_bf16_to_f32(((const uint16_t*)p)[i]);
    case ncclFloat32: return ((const float*)p)[i];
    default: return ((const double*)p)[i];
    }
}

/* One element of the reduction over the ranks' buffers x[r], starting at rank
   `start` and rounding to the dtype after every step. Integers in 64 bits. */
static void st_reduce_elem(int dt, int op, int n, const void* const* x, size_t i, int start, void* out, size_t oi)
{
    int fl = dt == ncclFloat16 || dt == ncclBfloat16 || dt == ncclFloat32 || dt == ncclFloat64;
    if (fl) {
        double acc = 0;
        for (int k = 0; k < n; k++) {
            double v = st_ld(dt, x[(start + k) % n], i);
            if (op == ncclAvg) v = dt == ncclFloat64 ? v * (1.0 / n) : (double)((float)v * (1.0f / (float)n));
            if (dt == ncclFloat16) v = vs_f16_to_f32(vs_f32_to_f16((float)v));
            if (dt == ncclBfloat16) v = vs_bf16_to_f32(vs_f32_to_bf16((float)v));
            if (k == 0) acc = v;
            else if (op == ncclMax) acc = v > acc ? v : acc;
            else if (op == ncclMin) acc = v < acc ? v : acc;
            else if (op == ncclProd) acc = dt == ncclFloat64 ? acc * v : (double)((float)acc * (float)v);
            else acc = dt == ncclFloat64 ? acc + v : (double)((float)acc + (float)v);
            if (dt == ncclFloat16) acc = vs_f16_to_f32(vs_f32_to_f16((float)acc));
            if (dt == ncclBfloat16) acc = vs_bf16_to_f32(vs_f32_to_bf16((float)acc));
        }
        switch (dt) {
        case ncclFloat16: ((uint16_t*)out)[oi] = vs_f32_to_f16((float)acc); break;
        case ncclBfloat16: ((uint16_t*)out)[oi] = vs_f32_to_bf16((float)acc); break;
        case ncclFloat32: ((float*)out)[oi] = (float)acc; break;
        default: ((double*)out)[oi] = acc; break;
        }
        return;
    }
    int sgn = dt == ncclInt8 || dt == ncclInt32 || dt == ncclInt64;
    int64_t acc = 0;
    uint64_t uacc = 0;
    for (int k = 0; k < n; k++) {
        const void* p = x[(start + k) % n];
        int64_t v = dt == ncclInt8 ? ((const int8_t*)p)[i] : dt == ncclInt32 ? ((const int32_t*)p)[i]
                  : dt == ncclInt64 ? ((const int64_t*)p)[i] : 0;
        uint64_t u = dt == ncclUint8 ? ((const uint8_t*)p)[i] : dt == ncclUint32 ? ((const uint32_t*)p)[i]
                   : dt == ncclUint64 ? ((const uint64_t*)p)[i] : 0;
        if (k == 0) acc = v, uacc = u;
        else if (op == ncclMax) acc = v > acc ? v : acc, uacc = u > uacc ? u : uacc;
        else if (op == ncclMin) acc = v < acc ? v : acc, uacc = u < uacc ? u : uacc;
        else if (op == ncclProd) acc = (int64_t)((uint64_t)acc * (uint64_t)v), uacc *= u;
        else acc = (int64_t)((uint64_t)acc + (uint64_t)v), uacc += u;
    }
    if (op == ncclAvg) acc /= n, uacc /= (uint64_t)n;
    switch (dt) {
    case ncclInt8: ((int8_t*)out)[oi] = (int8_t)acc; break;
    case ncclUint8: ((uint8_t*)out)[oi] = (uint8_t)uacc; break;
    case ncclInt32: ((int32_t*)out)[oi] = (int32_t)acc; break;
    case ncclUint32: ((uint32_t*)out)[oi] = (uint32_t)uacc; break;
    case ncclInt64: ((int64_t*)out)[oi] = acc; break;
    default: ((uint64_t*)out)[oi] = uacc; break;
    }
    (void)sgn;
}

/* Runs a collective whose ranks have all arrived (st_mu held): every input is
   read before any output is written (in-place buffers). */
static void st_collective_locked(st_clique* cq, st_inst* in)
{
    st_nop* p0 = in->part[0];
    int n = cq->n, kind = p0->kind, dt = p0->dt;
    size_t es = st_nsize(dt), cnt = p0->count;
    for (int r = 1; r < n; r++) {
        st_nop* q = in->part[r];
        if (q->kind != kind || q->count != cnt || q->dt != dt || q->op != p0->op ||
            ((kind == ST_N_REDUCE || kind == ST_N_BCAST) && q->peer != p0->peer)) {
            st_violation("nccl-mismatch",
                         "collective %ld of a communicator: rank 0 called %s(count %zu, type %d, op %d, root %d), rank "
                         "%d %s(count %zu, type %d, op %d, root %d)",
                         in->seq, st_nnames[kind], cnt, dt, p0->op, p0->peer, r, st_nnames[q->kind], q->count, q->dt,
                         q->op, q->peer);
            for (int k = 0; k < n; k++) in->part[k]->failed = 1, cq->ranks[k]->async = ncclInvalidUsage;
            return;
        }
    }
    int start = (int)(in->seq % n); /* no rank-order promise */
    const void** x = (const void**)calloc((size_t)n, sizeof(void*));
    size_t total = kind == ST_N_ALLGATHER ? cnt * (size_t)n : kind == ST_N_REDSCAT ? cnt * (size_t)n : cnt;
    int rooted = kind == ST_N_BCAST, known = 1;
    if (st_cost_only) { /* the carried inputs (vs_strict.h), each rank's send buffer at most ST_CARRY bytes */
        size_t sb = (kind == ST_N_REDSCAT ? total : cnt) * es;
        known = 0;
        for (int r = 0; r < n && sb <= ST_CARRY; r++)
            if (!rooted || r == p0->peer) {
                x[r] = malloc(sb + 1);
                known |= st_carry_read(in->part[r]->comm->dev, in->part[r]->sb, (void*)x[r], sb);
            }
    } else {
        for (int r = 0; r < n; r++) x[r] = st_sh(in->part[r]->sb);
    }
    char* tmp = known ? (char*)malloc(total * es + 1) : NULL;
    if (!known) {
    } else if (kind == ST_N_ALLREDUCE || kind == ST_N_REDUCE || kind == ST_N_REDSCAT) {
        for (size_t i = 0; i < total; i++) st_reduce_elem(dt, p0->op, n, x, i, start, tmp, i);
    } else if (kind == ST_N_BCAST) {
        memcpy(tmp, x[p0->peer], cnt * es);
    } else { /* all-gather */
        for (int r = 0; r < n; r++) memcpy(tmp + (size_t)r * cnt * es, x[r], cnt * es);
    }
    for (int r = 0; r < n; r++) {
        st_nop* q = in->part[r];
        if (kind == ST_N_REDUCE && r != p0->peer) continue;
        const char* v = !tmp ? NULL : kind == ST_N_REDSCAT ? tmp + (size_t)r * cnt * es : tmp;
        size_t vn = kind == ST_N_REDSCAT ? cnt * es : total * es;
        if (!st_cost_only) memcpy(st_sh(q->rb), v, vn);
        else st_carry_write(q->comm->dev, q->rb, v, vn); /* (nothing known: zeros) */
    }
    for (int r = 0; r < n && st_cost_only; r++) free((void*)x[r]);
    free(tmp);
    free((void*)x);
}

/* ---- a fused operation on a stream: a group's send/recv and collectives ---------- */

static int st_p2p_try_locked(st_clique* cq, st_nop* me)
{
    for (st_nop** pp = &cq->posted; *pp; pp = &(*pp)->pnext) {
        st_nop* o = *pp;
        int src = me->kind == ST_N_SEND ? me->comm->rank : me->peer, dst = me->kind == ST_N_SEND ? me->peer : me->comm->rank;
        if (o->kind == me->kind || o->seq != me->seq) continue;
        int osrc = o->kind == ST_N_SEND ? o->comm->rank : o->peer, odst = o->kind == ST_N_SEND ? o->peer : o->comm->rank;
        if (osrc != src || odst != dst) continue;
        *pp = o->pnext;
        st_nop *s = me->kind == ST_N_SEND ? me : o, *r = me->kind == ST_N_SEND ? o : me;
        if (s->count != r->count || s->dt != r->dt) {
            st_violation("nccl-mismatch", "ncclSend of %zu x type %d from rank %d met ncclRecv of %zu x type %d on rank %d",
                         s->count, s->dt, src, r->count, r->dt, dst);
            s->failed = r->failed = 1;
        } else if (!st_cost_only) {
            memcpy(st_sh(r->rb), st_sh(s->sb), s->count * st_nsize(s->dt));
        } else {
            st_carry_move(r->rb, r->comm->dev, s->sb, s->comm->dev, NULL, s->count * st_nsize(s->dt));
        }
        int devs[2] = {s->comm->dev, r->comm->dev};
        s->t0 = r->t0 = s->t_ready > r->t_ready ? s->t_ready : r->t_ready;
        s->t1 = r->t1 = s->t0 + st_clock_nccl_cost_locked(ST_N_SEND, 2, devs, (double)(s->count * st_nsize(s->dt)));
        s->matched = r->matched = 1;
        pthread_cond_broadcast(&cq->cv);
        return 1;
    }
    me->pnext = cq->posted;
    cq->posted = me;
    return 0;
}

/* A collective whose ranks all arrived: its end (vs_strict_clock.h). */
static void st_clock_coll_locked(st_clique* cq, st_inst* in)
{
    int devs[ST_MAXDEV], n = cq->n;
    st_nop* p0 = in->part[0];
    for (int r = 0; r < n; r++) devs[r] = in->part[r]->comm->dev;
    double per = (double)p0->count * (double)st_nsize(p0->dt);
    double bytes = per * (p0->kind == ST_N_ALLGATHER || p0->kind == ST_N_REDSCAT ? n : 1);
    in->t1 = in->t0 + st_clock_coll_cost_locked(p0->kind, n, devs, bytes, per, p0->tag);
}

/* A fused operation: its collectives one after another from its start, its
   send/recvs beside them, each pair from the later of its two sides. */
static void st_nccl_run(struct CUstream_st* s, st_op* op)
{
    pthread_mutex_lock(&st_mu);
    double t = op->t0, tp = op->t0; /* vs_strict_clock.h: the collectives' end so far, the send/recvs' */
    for (st_nop* q = op->nops; q; q = q->next)
        q->t_ready = op->t0;
    for (st_nop* q = op->nops; q; q = q->next)
        if ((q->kind == ST_N_SEND || q->kind == ST_N_RECV) && !st_stopped(q->comm)) st_p2p_try_locked(q->comm->cq, q);
    for (st_nop* q = op->nops; q; q = q->next) {
        if (q->kind == ST_N_SEND || q->kind == ST_N_RECV) continue;
        struct ncclComm* c = q->comm;
        st_clique* cq = c->cq;
        if (st_stopped(c)) continue; /* queued behind the stop: the kernel exits at once */
        st_inst* in = cq->insts;
        while (in && in->seq != q->seq) in = in->next;
        if (!in) {
            in = (st_inst*)calloc(1, sizeof *in);
            in->seq = q->seq, in->part = (st_nop**)calloc((size_t)cq->n, sizeof(st_nop*));
            in->next = cq->insts, cq->insts = in;
        }
        in->part[c->rank] = q;
        st_race_coll_arrive_locked(in, op);
        if (!in->arrived || t > in->t0) in->t0 = t;
        if (++in->arrived == cq->n && !in->broken) {
            st_collective_locked(cq, in);
            st_clock_coll_locked(cq, in);
            in->done = 1;
            pthread_cond_broadcast(&cq->cv);
        }
        s->blocked = q->what, s->bcomm = c;
        ST_WAIT_ON(&cq->cv, in->done || st_stopped(c), q->what);
        s->blocked = NULL, s->bcomm = NULL;
        if (in->done) st_race_coll_leave_locked(in, op);
        else in->broken = 1, in->part[c->rank] = NULL; /* stopped: the peers that come wait in vain */
        if (in->done) st_clock_comm_busy_locked(s->dev, s->id, q->tag, in->t0, in->t1, st_nnames[q->kind]), t = in->t1;
        if (++in->left == cq->n) { /* the last one out frees it (one that never came leaves it) */
            st_inst** pp = &cq->insts;
            while (*pp != in) pp = &(*pp)->next;
            *pp = in->next;
            st_race_inst_free_locked(in);
            free(in->part);
            free(in);
        }
    }
    for (st_nop* q = op->nops; q; q = q->next)
        if (q->kind == ST_N_SEND || q->kind == ST_N_RECV) {
            s->blocked = q->what, s->bcomm = q->comm;
            ST_WAIT_ON(&q->comm->cq->cv, q->matched || st_stopped(q->comm), q->what);
            s->blocked = NULL, s->bcomm = NULL;
            if (q->matched) st_clock_comm_busy_locked(s->dev, s->id, q->tag, q->t0, q->t1, st_nnames[q->kind]);
            if (q->matched && q->t1 > tp) tp = q->t1;
            if (!q->matched) { /* stopped: take it off the posted list */
                for (st_nop** pp = &q->comm->cq->posted; *pp; pp = &(*pp)->pnext)
                    if (*pp == q) {
                        *pp = q->pnext;
                        break;
                    }
            }
        }
    while (op->nops) {
        st_nop* q = op->nops;
        op->nops = q->next;
        q->comm->pending--;
        st_dev_pend[q->comm->dev]--;
        st_revoke_settle_locked(q->comm);
        free(q);
    }
    op->t1 = t > tp ? t : tp;
    st_count.nccl_ops++;
    pthread_cond_broadcast(&st_cv);
    pthread_mutex_unlock(&st_mu);
}

const char* st_nccl_waiting_locked(int dev)
{
    for (struct CUstream_st* s = st_dev_streams[dev]; s; s = s->dnext)
        if (s->head && s->head->fn == st_nccl_run && s->blocked && s->bcomm &&
            !st_stopped((struct ncclComm*)s->bcomm)) /* (a stopped communicator's kernels end) */
            return s->blocked;
    return NULL;
}

/* A collective of device dev's that waits for a peer that has not enqueued its
   side yet (st_mu held): what it is, or NULL. Then a call that synchronises the
   device can deadlock (the peer's host thread may be in such a call itself,
   before its side); beside operations whose peers all enqueued theirs it cannot
   (they complete without any host's help). */
static const char* st_nccl_unmatched_locked(int dev)
{
    for (struct CUstream_st* s = st_dev_streams[dev]; s; s = s->dnext) {
        if (!s->head || s->head->fn != st_nccl_run || !s->blocked || !s->bcomm ||
            st_stopped((struct ncclComm*)s->bcomm))
            continue;
        for (st_nop* q = s->head->nops; q; q = q->next) {
            struct ncclComm* c = q->comm;
            for (int r = 0; r < c->cq->n; r++) {
                struct ncclComm* p = c->cq->ranks[r];
                int p2p = q->kind == ST_N_SEND || q->kind == ST_N_RECV;
                if (r == c->rank || (p2p && r != q->peer)) continue;
                long have = !p     ? 0
                            : !p2p ? p->coll_seq
                            : q->kind == ST_N_SEND ? p->recv_seq[c->rank]
                                                   : p->send_seq[c->rank];
                if (have <= q->seq) return s->blocked;
            }
        }
    }
    return NULL;
}

/* For the hang report: why a stream blocked in bcomm's operation waits in vain. */
static const char* st_nccl_hang_note(void* bcomm)
{
    struct ncclComm* c = (struct ncclComm*)bcomm;
    if (!c || st_stopped(c)) return "";
    for (int r = 0; r < c->cq->n; r++) {
        struct ncclComm* p = c->cq->ranks[r];
        if (p && p != c && (p->revoked || p->aborted || p->halt))
            return "; a peer revoked or aborted this communicator, which stops that rank's operations only: this "
                   "rank must revoke (or abort) it too";
    }
    return "";
}

/* ---- the API ------------------------------------------------------------------- */

static const char* st_nres(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}
ST_C const char* ncclGetErrorString(ncclResult_t r) { return st_nres(r); }
ST_C const char* ncclGetLastError(ncclComm_t c)
{
    (void)c;
    return "";
}
ST_C ncclResult_t ncclGetVersion(int* v)
{
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ST_C ncclResult_t ncclGetUniqueId(ncclUniqueId* id)
{
    memset(id, 0, sizeof *id);
    long k = __atomic_add_fetch(&st_idctr, 1, __ATOMIC_SEQ_CST);
    snprintf(id->internal, sizeof id->internal, "vs_strict-%ld-%u", k, st_rand());
    return ncclSuccess;
}

static struct ncclComm* st_comm_new_locked(st_clique* cq, int rank, int dev, int blocking)
{
    struct ncclComm* c = (struct ncclComm*)calloc(1, sizeof *c);
    c->cq = cq, c->rank = rank, c->n = cq->n, c->dev = dev, c->blocking = blocking;
    c->send_seq = (long*)calloc((size_t)cq->n, sizeof(long));
    c->recv_seq = (long*)calloc((size_t)cq->n, sizeof(long));
    c->gnext = st_comms, st_comms = c;
    cq->ranks[rank] = c;
    return c;
}

static st_clique* st_clique_new_locked(int n)
{
    st_clique* cq = (st_clique*)calloc(1, sizeof *cq);
    cq->n = n;
    pthread_cond_init(&cq->cv, NULL);
    cq->ranks = (struct ncclComm**)calloc((size_t)n, sizeof(struct ncclComm*));
    cq->next = st_cliques, st_cliques = cq;
    return cq;
}

static int st_blocking(const ncclConfig_t* cfg) { return !cfg || cfg->blocking == NCCL_CONFIG_UNDEF_INT || cfg->blocking; }

ST_C ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int n, ncclUniqueId id, int rank, ncclConfig_t* cfg)
{
    if (!out || n < 1 || n > ST_MAXDEV || rank < 0 || rank >= n) return ncclInvalidArgument;
    pthread_mutex_lock(&st_mu);
    st_init_locked();
    st_clique* cq = st_cliques;
    while (cq && memcmp(cq->id, id.internal, sizeof cq->id)) cq = cq->next;
    if (!cq) {
        cq = st_clique_new_locked(n);
        memcpy(cq->id, id.internal, sizeof cq->id);
    }
    if (cq->n != n || cq->ranks[rank]) {
        pthread_mutex_unlock(&st_mu);
        st_violation("nccl-mismatch", "ncclCommInitRank: rank %d of %d joins a clique of %d%s", rank, n, cq->n,
                     cq->ranks[rank] ? " where that rank is taken" : "");
        return ncclInvalidUsage;
    }
    struct ncclComm* c = st_comm_new_locked(cq, rank, st_cur_dev, st_blocking(cfg));
    cq->joined++;
    pthread_cond_broadcast(&st_cv);
    *out = c;
    if (c->blocking) ST_WAIT_UNTIL(cq->joined == cq->n, "ncclCommInitRank");
    int ready = cq->joined == cq->n;
    pthread_mutex_unlock(&st_mu);
    return ready ? ncclSuccess : ncclInProgress;
}
ST_C ncclResult_t ncclCommInitRank(ncclComm_t* out, int n, ncclUniqueId id, int rank)
{
    return ncclCommInitRankConfig(out, n, id, rank, NULL);
}

/* A call on c: live, and the rule that one device's NCCL is issued by one
   thread at a time (st_mu held). */
static ncclResult_t st_comm_ok_locked(struct ncclComm* c, const char* fn)
{
    if (!c) return ncclInvalidArgument;
    if (c->destroyed) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "%s on a communicator already destroyed or aborted", fn);
        pthread_mutex_lock(&st_mu);
        return ncclInvalidUsage;
    }
    return ncclSuccess;
}

static ncclResult_t st_async_locked(const struct ncclComm* c)
{
    if (c->cq->joined < c->cq->n || (c->finalized && c->pending) || c->revoking) return ncclInProgress;
    return c->async;
}

ST_C ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* r)
{
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = st_comm_ok_locked(c, "ncclCommGetAsyncError");
    if (!e) *r = st_async_locked(c);
    pthread_mutex_unlock(&st_mu);
    return e;
}

ST_C ncclResult_t ncclCommCount(const ncclComm_t c, int* n)
{
    *n = c->n;
    return ncclSuccess;
}
ST_C ncclResult_t ncclCommUserRank(const ncclComm_t c, int* r)
{
    *r = c->rank;
    return ncclSuccess;
}
ST_C ncclResult_t ncclCommCuDevice(const ncclComm_t c, int* d)
{
    *d = c->dev;
    return ncclSuccess;
}

/* The instance of a split or shrink (list: cq->splits or cq->shrinks) at a
   rank's seq-th such call: the ranks' calls meet there. */
static st_split* st_split_get_locked(st_split** list, int n, long seq)
{
    st_split* sp = *list;
    while (sp && sp->seq != seq) sp = sp->next;
    if (!sp) {
        sp = (st_split*)calloc(1, sizeof *sp);
        sp->seq = seq;
        sp->color = (int*)calloc((size_t)n, sizeof(int));
        sp->key = (int*)calloc((size_t)n, sizeof(int));
        sp->blocking = (int*)calloc((size_t)n, sizeof(int));
        sp->slot = (struct ncclComm***)calloc((size_t)n, sizeof(struct ncclComm**));
        sp->next = *list, *list = sp;
    }
    return sp;
}

/* The last caller of a split or shrink makes every child and writes every
   caller's slot (other ranks see theirs written later, by another thread). */
static void st_split_make_locked(st_clique* cq, st_split* sp)
{
    int n = cq->n;
    int* done = (int*)calloc((size_t)n, sizeof(int));
    for (int r = 0; r < n; r++) {
        if (done[r]) continue;
        if (sp->color[r] == NCCL_SPLIT_NOCOLOR) {
            if (sp->slot[r]) __atomic_store_n(sp->slot[r], (struct ncclComm*)NULL, __ATOMIC_RELEASE);
            done[r] = 1;
            continue;
        }
        int members[ST_MAXDEV], m = 0;
        for (int q = 0; q < n; q++)
            if (!done[q] && sp->color[q] == sp->color[r]) members[m++] = q;
        for (int i = 1; i < m; i++) /* by key, then parent rank */
            for (int j = i; j > 0 && (sp->key[members[j]] < sp->key[members[j - 1]] ||
                                      (sp->key[members[j]] == sp->key[members[j - 1]] && members[j] < members[j - 1]));
                 j--) {
                int t = members[j];
                members[j] = members[j - 1], members[j - 1] = t;
            }
        st_clique* child = st_clique_new_locked(m);
        snprintf(child->id, sizeof child->id, "vs_strict-split-%ld", __atomic_add_fetch(&st_idctr, 1, __ATOMIC_SEQ_CST));
        child->joined = m;
        for (int i = 0; i < m; i++) {
            int q = members[i];
            struct ncclComm* nc = st_comm_new_locked(child, i, cq->ranks[q]->dev, sp->blocking[q]);
            __atomic_store_n(sp->slot[q], nc, __ATOMIC_RELEASE);
            done[q] = 1;
        }
    }
    free(done);
    for (int r = 0; r < n; r++)
        if (sp->slot[r] && cq->ranks[r]->async == ncclInProgress) cq->ranks[r]->async = ncclSuccess;
    sp->done = 1;
    pthread_cond_broadcast(&st_cv);
}

/* A child's blocking mode: its config's, else its parent's (NCCL: config NULL
   inherits the parent's configuration). The call itself blocks as the parent
   does (NCCL runs it as a job of the parent's group). */
static int st_child_blocking(const struct ncclComm* parent, const ncclConfig_t* cfg)
{
    return cfg ? st_blocking(cfg) : parent->blocking;
}

ST_C ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t* out, ncclConfig_t* cfg)
{
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = out ? st_comm_ok_locked(c, "ncclCommSplit") : ncclInvalidArgument;
    if (e) {
        pthread_mutex_unlock(&st_mu);
        return e;
    }
    st_clique* cq = c->cq;
    st_split* sp = st_split_get_locked(&cq->splits, cq->n, c->split_seq++);
    sp->color[c->rank] = color, sp->key[c->rank] = key, sp->slot[c->rank] = out;
    sp->blocking[c->rank] = st_child_blocking(c, cfg);
    c->async = ncclInProgress;
    if (++sp->arrived == cq->n) st_split_make_locked(cq, sp);
    if (c->blocking) ST_WAIT_UNTIL(sp->done, "ncclCommSplit");
    pthread_mutex_unlock(&st_mu);
    return ncclSuccess; /* as NCCL 2.28 answers a non-blocking split that still runs */
}

static int st_cmp_int(const void* a, const void* b)
{
    int x = *(const int*)a, y = *(const int*)b;
    return x < y ? -1 : x > y;
}

/* "{2, 6}" */
static const char* st_rank_list(char* buf, size_t cap, const int* r, int n)
{
    size_t k = (size_t)snprintf(buf, cap, "{");
    for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%d", i ? ", " : "", r[i]);
    if (k < cap) snprintf(buf + k, cap - k, "}");
    return buf;
}

/* ncclCommShrink: a split of the ranks not excluded, in their order, called by
   those ranks only (an excluded rank may be dead: nobody waits for it). */
ST_C ncclResult_t ncclCommShrink(ncclComm_t c, int* excl, int nexcl, ncclComm_t* out, ncclConfig_t* cfg, int flags)
{
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = st_comm_ok_locked(c, "ncclCommShrink");
    if (e) {
        pthread_mutex_unlock(&st_mu);
        return e;
    }
    int n = c->cq->n, me = c->rank;
    if (flags & ~NCCL_SHRINK_ABORT) {
        pthread_mutex_unlock(&st_mu);
        st_violation("nccl-flags",
                     "ncclCommShrink(shrinkFlags 0x%x) on rank %d of %d: bits NCCL 2.28 does not define (it has "
                     "NCCL_SHRINK_DEFAULT 0 and NCCL_SHRINK_ABORT 1) and ignores",
                     (unsigned)flags, me, n);
        pthread_mutex_lock(&st_mu);
    }
    if (flags & NCCL_SHRINK_ABORT) { /* NCCL: raise the abort flag, synchronise, lower it */
        c->halt = 1;
        pthread_cond_broadcast(&st_cv);
        st_stop_wake_locked(c);
        ST_WAIT_UNTIL(!c->pending, "ncclCommShrink's NCCL_SHRINK_ABORT (the parent's operations stopping)");
        c->halt = 0;
    }
    if (!excl || nexcl <= 0 || !out) {
        pthread_mutex_unlock(&st_mu);
        return ncclInvalidArgument;
    }
    qsort(excl, (size_t)nexcl, sizeof(int), st_cmp_int); /* in place, as NCCL does */
    char mine[256], theirs[256];
    st_rank_list(mine, sizeof mine, excl, nexcl);
    int self = 0, isbad = 0, bad = 0;
    for (int i = 0; i < nexcl; i++) {
        self |= excl[i] == me;
        if (excl[i] < 0 || excl[i] >= n || (i && excl[i] == excl[i - 1])) isbad = 1, bad = excl[i];
    }
    if (self || isbad) {
        pthread_mutex_unlock(&st_mu);
        if (self)
            st_violation("nccl-shrink-excluded",
                         "ncclCommShrink on rank %d of %d, which its excludeRanksList %s excludes (excluded ranks "
                         "must not call it; NCCL answers ncclInvalidArgument)",
                         me, n, mine);
        else
            st_violation("nccl-shrink-list",
                         "ncclCommShrink on rank %d of %d: excludeRanksList %s names rank %d %s (NCCL would make a "
                         "communicator of the wrong size)",
                         me, n, mine, bad, bad < 0 || bad >= n ? "outside the communicator" : "twice");
        return ncclInvalidArgument;
    }
    ncclResult_t st = st_async_locked(c); /* NCCL's ncclCommEnsureReady */
    if (st == ncclInProgress) {
        pthread_mutex_unlock(&st_mu);
        st_violation("nccl-not-ready",
                     "ncclCommShrink on rank %d of %d while the communicator's state is ncclInProgress (%s): poll "
                     "ncclCommGetAsyncError until ncclSuccess first (NCCL answers ncclInvalidArgument)",
                     me, n, c->revoking ? "its revoke still stopping operations" : "an operation not settled");
        return ncclInvalidArgument;
    }
    if (st != ncclSuccess) { /* NCCL 2.28 returns the parent's async error, NCCL_SHRINK_ABORT or not */
        pthread_mutex_unlock(&st_mu);
        return st;
    }
    if (!(flags & NCCL_SHRINK_ABORT) && c->pending) {
        long p = c->pending;
        pthread_mutex_unlock(&st_mu);
        st_violation("nccl-shrink-busy",
                     "ncclCommShrink(NCCL_SHRINK_DEFAULT) on rank %d of %d with %ld operations of the parent in "
                     "flight: they must be quiesced first (or NCCL_SHRINK_ABORT, or ncclCommRevoke, stops them)",
                     me, n, p);
        pthread_mutex_lock(&st_mu);
    }
    __atomic_store_n(out, (struct ncclComm*)NULL, __ATOMIC_RELEASE); /* NCCL: NULL until the child is made */
    st_clique* cq = c->cq;
    st_split* sp = st_split_get_locked(&cq->shrinks, n, c->shrink_seq++);
    int differ = sp->excl && (nexcl != sp->nexcl || memcmp(excl, sp->excl, (size_t)nexcl * sizeof(int)));
    if (!sp->excl) {
        sp->excl = (int*)malloc((size_t)nexcl * sizeof(int));
        memcpy(sp->excl, excl, (size_t)nexcl * sizeof(int));
        sp->nexcl = nexcl, sp->first = me;
    }
    if (differ || sp->failed) {
        int report = differ && !sp->failed; /* once per shrink, or per late caller of one made */
        if (report) st_rank_list(theirs, sizeof theirs, sp->excl, sp->nexcl);
        if (report && !sp->done) { /* the callers so far fail with it */
            sp->failed = 1, sp->done = 1;
            for (int r = 0; r < n; r++)
                if (sp->slot[r]) cq->ranks[r]->async = ncclInvalidUsage;
            pthread_cond_broadcast(&st_cv);
        }
        c->async = ncclInvalidUsage;
        pthread_mutex_unlock(&st_mu);
        if (report)
            st_violation("nccl-mismatch",
                         "ncclCommShrink %ld of a communicator of %d: rank %d excludes %s, rank %d excludes %s (every "
                         "caller must pass the same ranks; NCCL would hang or make mismatched communicators)",
                         sp->seq, n, sp->first, theirs, me, mine);
        return c->blocking ? ncclInvalidUsage : ncclSuccess;
    }
    sp->color[me] = 0, sp->key[me] = me, sp->slot[me] = out, sp->blocking[me] = st_child_blocking(c, cfg);
    c->async = ncclInProgress;
    if (++sp->arrived == n - sp->nexcl) {
        for (int i = 0; i < sp->nexcl; i++) sp->color[sp->excl[i]] = NCCL_SPLIT_NOCOLOR;
        st_split_make_locked(cq, sp);
    }
    char what[384];
    snprintf(what, sizeof what, "ncclCommShrink (rank %d of %d excluding %s: every other rank must call it)", me, n, mine);
    if (c->blocking) ST_WAIT_UNTIL(sp->done, what);
    e = c->blocking && sp->failed ? ncclInvalidUsage : ncclSuccess;
    pthread_mutex_unlock(&st_mu);
    return e; /* non-blocking: as a split, ncclSuccess while it runs */
}

/* ncclCommRevoke: this rank's operations on c stop (in flight and queued: their
   kernels end without writing), later ones are refused; c stays for destroy,
   split and shrink. Local, as NCCL's: a peer blocked in a collective of c waits
   until it revokes (or aborts) c too. */
ST_C ncclResult_t ncclCommRevoke(ncclComm_t c, int flags)
{
    if (!c) return ncclSuccess;
    if (flags != NCCL_REVOKE_DEFAULT) return ncclInvalidArgument;
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = st_comm_ok_locked(c, "ncclCommRevoke");
    if (!e && c->revoked) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-revoke", "ncclCommRevoke of a communicator already revoked (rank %d of %d)", c->rank,
                     c->n);
        return ncclInvalidArgument;
    }
    if (!e && c->finalized) e = ncclInvalidArgument; /* NCCL refuses a revoke after ncclCommFinalize */
    if (e) {
        pthread_mutex_unlock(&st_mu);
        return e;
    }
    c->revoked = 1, c->revoking = 1;
    st_revoke_settle_locked(c);
    st_stop_wake_locked(c); /* its streams blocked in its operations stop waiting */
    pthread_cond_broadcast(&st_cv);
    if (c->blocking) ST_WAIT_UNTIL(!c->revoking, "ncclCommRevoke (the communicator's operations stopping)");
    e = c->revoking ? ncclInProgress : ncclSuccess;
    pthread_mutex_unlock(&st_mu);
    return e;
}

ST_C ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (!c) return ncclSuccess;
    pthread_mutex_lock(&st_mu);
    if (c->destroyed && !c->aborted) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-destroy", "ncclCommAbort on a destroyed communicator");
        return ncclInvalidUsage;
    }
    c->aborted = 1, c->destroyed = 1;
    st_stop_wake_locked(c);
    pthread_cond_broadcast(&st_cv);
    pthread_mutex_unlock(&st_mu);
    return ncclSuccess;
}

ST_C ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = st_comm_ok_locked(c, "ncclCommFinalize");
    if (!e && c->revoked) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-revoke",
                     "ncclCommFinalize of a revoked communicator (rank %d of %d): invalid after ncclCommRevoke (NCCL "
                     "answers ncclInvalidArgument); destroy it",
                     c->rank, c->n);
        return ncclInvalidArgument;
    }
    if (!e) {
        c->finalized = 1;
        if (c->blocking) ST_WAIT_UNTIL(!c->pending, "ncclCommFinalize");
        e = c->pending ? ncclInProgress : ncclSuccess;
    }
    pthread_mutex_unlock(&st_mu);
    return e;
}

ST_C ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = st_comm_ok_locked(c, "ncclCommDestroy");
    if (!e && c->pending) {
        long p = c->pending;
        pthread_mutex_unlock(&st_mu);
        st_violation("nccl-destroy-busy", "ncclCommDestroy with %ld operations in flight (%s)", p,
                     c->revoked ? "a revoked communicator: wait until ncclCommGetAsyncError answers ncclSuccess"
                                : "finalize first");
        pthread_mutex_lock(&st_mu);
    }
    if (!e) c->destroyed = 1;
    pthread_cond_broadcast(&st_cv);
    pthread_mutex_unlock(&st_mu);
    return e;
}

/* Checks a buffer NCCL is given: GPU-reachable memory of c's device. */
static int st_nccl_buf_locked(struct ncclComm* c, const void* p, size_t bytes, const char* fn, const char* side)
{
    if (!bytes) return 1;
    int dev = -1, w = st_where_locked(p, bytes, &dev);
    if (w == ST_DEV && dev == c->dev) return 1;
    if (w == ST_PINNED) return 1;
    pthread_mutex_unlock(&st_mu);
    if (w == ST_DEV)
        st_violation("cross-device", "%s: %s %p is memory of device %d, the communicator's device is %d", fn, side, p,
                     dev, c->dev);
    else
        st_violation(w == ST_HOST ? "host-pointer" : "device-bounds",
                     "%s: %s %p + %zu bytes is %s: NCCL takes only GPU-reachable memory (NCCL_CHECK_POINTERS=1 "
                     "refuses it; without it the kernel faults)",
                     fn, side, p, bytes, st_where_names[w]);
    pthread_mutex_lock(&st_mu);
    return 0;
}

/* Every collective and send/recv: checks, then enqueued (or kept for the group). */
static ncclResult_t st_nccl_call(int kind, const void* sb, void* rb, size_t count, ncclDataType_t dt, int op, int peer,
                                 ncclComm_t c, cudaStream_t h)
{
    const char* fn = st_nnames[kind];
    st_clock_call();
    pthread_mutex_lock(&st_mu);
    ncclResult_t e = st_comm_ok_locked(c, fn);
    if (e) {
        pthread_mutex_unlock(&st_mu);
        return e;
    }
    if (c->revoked) {
        pthread_mutex_unlock(&st_mu);
        st_violation("use-after-revoke", "%s on a revoked communicator (rank %d of %d): NCCL refuses it (ncclInvalidUsage)",
                     fn, c->rank, c->n);
        return ncclInvalidUsage;
    }
    if ((int)dt < 0 || dt > ncclBfloat16 || op < 0 || op > ncclAvg ||
        ((kind == ST_N_REDUCE || kind == ST_N_BCAST || kind == ST_N_SEND || kind == ST_N_RECV) && (peer < 0 || peer >= c->n))) {
        pthread_mutex_unlock(&st_mu);
        return ncclInvalidArgument;
    }
    struct CUstream_st* s = st_stream_locked(h);
    if (s->dev != c->dev) {
        pthread_mutex_unlock(&st_mu);
        st_violation("cross-device", "%s: a stream of device %d for a communicator of device %d", fn, s->dev, c->dev);
        return ncclInvalidArgument;
    }
    size_t es = st_nsize(dt), n = (size_t)c->n;
    size_t sbytes = kind == ST_N_RECV ? 0
                  : kind == ST_N_REDSCAT ? count * n * es
                  : (kind == ST_N_BCAST && c->rank != peer) ? 0 : count * es;
    size_t rbytes = kind == ST_N_SEND ? 0
                  : kind == ST_N_ALLGATHER ? count * n * es
                  : (kind == ST_N_REDUCE && c->rank != peer) ? 0 : count * es;
    if (!st_nccl_buf_locked(c, sb, sbytes, fn, "send buffer") || !st_nccl_buf_locked(c, rb, rbytes, fn, "receive buffer")) {
        pthread_mutex_unlock(&st_mu);
        return ncclInvalidArgument;
    }
    /* one device's NCCL from one thread at a time (NCCL's "Thread Safety") */
    int dev = c->dev;
    if (st_dev_pend[dev] > 0 && !pthread_equal(st_dev_tid[dev], pthread_self())) {
        pthread_mutex_unlock(&st_mu);
        st_violation("nccl-threads",
                     "%s on device %d from a second host thread while the first one's NCCL operations on that device "
                     "are in flight (NCCL: not safe to issue operations to communicators of one device from several "
                     "threads at once)",
                     fn, dev);
        pthread_mutex_lock(&st_mu);
    }
    st_dev_tid[dev] = pthread_self();
    if (kind == ST_N_SEND || kind == ST_N_RECV)
        st_count.nccl_p2p++;
    else
        st_count.nccl_colls++;
    st_nop* q = (st_nop*)calloc(1, sizeof *q);
    q->kind = kind, q->comm = c, q->sb = sb, q->rb = rb, q->count = count, q->dt = (int)dt, q->op = op, q->peer = peer;
    q->sbytes = sbytes, q->rbytes = rbytes;
    if (st_tagger) { /* vs_strict_clock.h: the communicator's devices (a send/recv: its two sides) */
        int* devs = (int*)malloc(sizeof(int) * (n + 2)), nd = 0;
        if (kind == ST_N_SEND || kind == ST_N_RECV) {
            struct ncclComm* p = c->cq->ranks[peer];
            devs[nd++] = kind == ST_N_SEND ? c->dev : p ? p->dev : -1;
            devs[nd++] = kind == ST_N_SEND ? (p ? p->dev : -1) : c->dev;
        } else {
            for (int k = 0; k < c->n; k++) devs[nd++] = c->cq->ranks[k] ? c->cq->ranks[k]->dev : -1;
        }
        q->tag = st_clock_nccl_tag_locked(kind, nd, devs);
        free(devs);
    } else {
        q->tag = st_clock_nccl_tag_locked(kind, 0, NULL);
    }
    q->seq = kind == ST_N_SEND ? c->send_seq[peer]++ : kind == ST_N_RECV ? c->recv_seq[peer]++ : c->coll_seq++;
    snprintf(q->what, sizeof q->what, "%s (rank %d of %d on device %d, %s %d, operation %ld)", fn, c->rank, c->n, c->dev,
             kind == ST_N_SEND || kind == ST_N_RECV ? "peer" : "root", peer, q->seq);
    c->pending++;
    st_dev_pend[dev]++;
    if (st_gdepth > 0) {
        q->next = NULL;
        *(st_ghead ? &st_gtail->next : &st_ghead) = q;
        st_gtail = q;
        q->pnext = (st_nop*)(void*)s; /* the stream, until the group ends */
    } else {
        st_op* o = st_op_new(fn, st_nccl_run);
        o->nops = q;
        st_push_locked(s, o);
    }
    pthread_mutex_unlock(&st_mu);
    if (st_delay_us) usleep(st_rand() % (unsigned)(st_delay_us + 1)); /* widens the window of the thread check */
    return ncclSuccess;
}

ST_C ncclResult_t ncclGroupStart(void)
{
    st_gdepth++;
    return ncclSuccess;
}

ST_C ncclResult_t ncclGroupEnd(void)
{
    if (st_gdepth <= 0) return ncclInvalidUsage;
    if (--st_gdepth > 0) return ncclSuccess;
    pthread_mutex_lock(&st_mu);
    int nonblocking = 0;
    while (st_ghead) { /* one fused operation per stream, streams in first-use order */
        struct CUstream_st* s = (struct CUstream_st*)(void*)st_ghead->pnext;
        st_op* o = st_op_new("NCCL group", st_nccl_run);
        st_nop **keep = &st_ghead, **tail = &o->nops;
        while (*keep) {
            st_nop* q = *keep;
            if ((struct CUstream_st*)(void*)q->pnext == s) {
                *keep = q->next;
                q->next = NULL, q->pnext = NULL;
                *tail = q, tail = &q->next;
                nonblocking |= !q->comm->blocking;
            } else {
                keep = &q->next;
            }
        }
        st_push_locked(s, o);
    }
    st_gtail = NULL;
    pthread_mutex_unlock(&st_mu);
    return nonblocking ? ncclInProgress : ncclSuccess; /* a non-blocking group may answer ncclInProgress */
}

ST_C ncclResult_t ncclAllReduce(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t c,
                                cudaStream_t st)
{
    return st_nccl_call(ST_N_ALLREDUCE, sb, rb, count, dt, (int)op, 0, c, st);
}
ST_C ncclResult_t ncclReduce(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                             ncclComm_t c, cudaStream_t st)
{
    return st_nccl_call(ST_N_REDUCE, sb, rb, count, dt, (int)op, root, c, st);
}
ST_C ncclResult_t ncclBroadcast(const void* sb, void* rb, size_t count, ncclDataType_t dt, int root, ncclComm_t c,
                                cudaStream_t st)
{
    return st_nccl_call(ST_N_BCAST, sb, rb, count, dt, 0, root, c, st);
}
ST_C ncclResult_t ncclBcast(void* b, size_t count, ncclDataType_t dt, int root, ncclComm_t c, cudaStream_t st)
{
    return st_nccl_call(ST_N_BCAST, b, b, count, dt, 0, root, c, st);
}
ST_C ncclResult_t ncclAllGather(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclComm_t c, cudaStream_t st)
{
    return st_nccl_call(ST_N_ALLGATHER, sb, rb, count, dt, 0, 0, c, st);
}
ST_C ncclResult_t ncclReduceScatter(const void* sb, void* rb, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                    ncclComm_t c, cudaStream_t st)
{
    return st_nccl_call(ST_N_REDSCAT, sb, rb, count, dt, (int)op, 0, c, st);
}
ST_C ncclResult_t ncclSend(const void* sb, size_t count, ncclDataType_t dt, int peer, ncclComm_t c, cudaStream_t st)
{
    return st_nccl_call(ST_N_SEND, sb, NULL, count, dt, 0, peer, c, st);
}
ST_C ncclResult_t ncclRecv(void* rb, size_t count, ncclDataType_t dt, int peer, ncclComm_t c, cudaStream_t st)
{
    return st_nccl_call(ST_N_RECV, NULL, rb, count, dt, 0, peer, c, st);
}
