# vescale - build, test, run. Nothing here is needed to *use* the headers:
# copy them into your tree and define VESCALE_IMPLEMENTATION in one file.
CC      ?= cc
CXX     ?= c++
MPICC   ?= mpicc
NVCC    ?= nvcc
CUDA    ?= /usr/local/cuda
OPT     ?= -O2 -g
WARN    := -Wall -Wextra -Werror
CFLAGS  := -std=c99 $(OPT) $(WARN) -D_POSIX_C_SOURCE=200809L -I.
LDLIBS  := -lpthread -lm
B       ?= build
SAN     ?=
COMPILE_CHECK ?= 1
HEADERS := $(wildcard vescale*.h)
comma   := ,

# Open MPI refuses root without these; harmless otherwise.
MPIRUN  ?= mpirun --allow-run-as-root --oversubscribe
export OMPI_MCA_rmaps_base_oversubscribe = 1
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo 1)

TESTS   := $(patsubst tests/%.c,$(B)/%,$(filter-out tests/test_nccl.c tests/test_ckpt_nccl.c tests/test_pipe_nccl.c tests/test_strict_counts.c tests/test_train_counts.c tests/test_strict_clock.c tests/test_strict_model.c tests/test_strict_train.c tests/test_ddp_solo.c tests/test_strict_scale.c tests/test_strict_costonly.c tests/test_strict_shrink.c tests/test_elastic_procs.c tests/test_lighthouse.c tests/test_train_nccl.c tests/test_gpt_nccl.c tests/test_nccl_vendor.c tests/test_elastic_mpi.c tests/test_gpu_calib.c,$(wildcard tests/test_*.c)))
# collectives and layouts again with every copy streamed (non-temporal path)
TESTS   += $(B)/test_collectives_nt $(B)/test_layout_nt
# tests that also run with ranks as MPI processes
MPI_NAMES := collectives mesh errors layout ddp_procs ckpt_scale
MPI_TESTS := $(if $(HAVE_MPI),$(foreach t,$(MPI_NAMES),$(if $(wildcard tests/test_$(t).c),$(B)/test_$(t)_mpi)))

.PHONY: all run run-gpu test test-long test-hosts test-asan test-tsan test-gpu bench bench-redistribute bench-ddp bench-data bench-elastic compile-check clean
all: $(TESTS) $(MPI_TESTS) $(B)/demo

$(B):
	@mkdir -p $(B)

# --- the implementation, compiled once per configuration (issue 33.7) -------------
# Each test binary used to compile the whole implementation into itself (~31k lines,
# 6-20 s of CPU each at -O2: most of a CI run's building). tests/vs_impl.c compiles it
# once per configuration into $(B)/impl/<config>.o (plain: threads; nt:
# VESCALE_NT_MIN=0; mpi: VESCALE_MPI; strict: VESCALE_NCCL over the strict stand-in's
# CUDA and NCCL, below), each with the build's OPT and SAN, so test-asan and
# test-tsan (their own B) get their own objects. Precompiled headers would not do:
# parsing is 0.6 s of the 17 s of CPU the whole implementation takes; generating its
# code is the cost. A program builds in one of three ways:
# - IMPL_LINKED, a program that uses only the public API: -include tests/vs_linked.h,
#   which marks the parts implemented (its own #define VESCALE_IMPLEMENTATION then
#   gives declarations only), and the object. The examples and vescale-lighthouse
#   too (a user's one-file build is what compile_check.sh and install_check.sh check).
# - IMPL_PRIV, a program that names private parts (_vs_* helpers, _VS_* macros, a
#   handle's struct; the strict stand-in's programs, which run the private host
#   kernels): -include tests/vs_private.h, every part's implementation with the
#   public functions' bodies removed ($(B)/priv/, tests/vs_private.awk), and the
#   object. The private helpers it calls are compiled into it, as before; the public
#   functions are the object's.
# - IMPL_OWN compiles the implementation into itself, as before: a test that sets a
#   macro the implementation reads before its include (the mock runtime's, the
#   checkpoint's read-ahead thresholds: found by awk), or that reads the library's
#   static state (the kernel cache's counts: its own copy would be another one; the
#   thread's error state is shared: tests/vs_private.awk).
# A new tests/test_*.c needs no rule: the greps place it. A linked build that fails
# is tried private, and a private one that fails is compiled the old way, with a
# note naming it.
IMPL_OWN    := $(sort $(patsubst tests/%.c,%,\
               $(shell awk 'FNR == 1 { done = 0 } done { next } /^[ \t]*\#[ \t]*include[ \t]*"[^"]*vescale[a-z_]*\.h"/ { done = 1; next } \
                            /^[ \t]*\#[ \t]*define[ \t]+(_VS_|VESCALE_|VS_ASSERT|VS_API)/ && !/VESCALE_IMPLEMENTATION/ { print FILENAME; done = 1 }' tests/test_*.c) \
               $(shell grep -lE '\b(_vs_kc|_vs_ddp_guards|_vs_ddp_guard_mu|_vs_ddp_segv_on|_vs_ddp_guard_full)\b' tests/test_*.c)))
IMPL_PRIV   := $(filter-out $(IMPL_OWN),$(patsubst tests/%.c,%,$(shell grep -lE '\b_(vs|VS)_[A-Za-z]|\#include "[^"]*strict' tests/test_*.c)) \
               test_badinput test_data test_errors test_faults_mpi test_ddp_ext test_ddp_hsdp test_train_counts) \
               train_gpt_strict vescale-ckpt gpu_calib $(patsubst tests/strict/neg/%.c,%,$(wildcard tests/strict/neg/*.c))
IMPL_LINKED := $(filter-out $(IMPL_OWN) $(IMPL_PRIV),$(patsubst tests/%.c,%,$(wildcard tests/test_*.c))) \
               mlp_dp_tp pipe_mlp train_gpt flat_trainer vescale-lighthouse
IMPL_SHARED := $(IMPL_LINKED) $(IMPL_PRIV)
# $(call BUILD,<compiler and flags>,<config>,<libraries>) in a recipe: compiles $< into
# $@ in the way its program's list says, against $(B)/impl/<config>.o.
_VS_OWN  = $(1) -o $@ $< $(3)
_VS_LINK = $(1) $(IMPL_FLAGS_$(2)) -o $@ $< -include tests/vs_linked.h $(B)/impl/$(2).o $(IMPL_OBJS_$(2)) $(3) 2>/dev/null
_VS_PRIV = $(1) $(IMPL_FLAGS_$(2)) -iquote $(B)/priv -o $@ $< -include tests/vs_private.h $(B)/impl/$(2).o $(IMPL_OBJS_$(2)) $(3) 2>/dev/null
_VS_NOTE = echo "note: $< does not build against $(B)/impl/$(2).o: compiled with the implementation (list it in IMPL_OWN, with the reason)"
BUILD = $(if $(filter $(notdir $(basename $<)),$(IMPL_OWN)),$(_VS_OWN),\
	$(if $(filter $(notdir $(basename $<)),$(IMPL_PRIV)),,$(_VS_LINK) || )$(_VS_PRIV) || { $(_VS_NOTE); $(_VS_OWN); })
# the implementations with the public functions' bodies removed (tests/vs_private.h)
PRIV_H := $(HEADERS:%=$(B)/priv/%)
$(PRIV_H): $(B)/priv/%: % tests/vs_private.awk | $(B)
	@mkdir -p $(@D)
	awk -f tests/vs_private.awk $< >$@.tmp && mv $@.tmp $@
$(IMPL_SHARED:%=$(B)/%) $(B)/flat_trainer_dp_tp $(B)/flat_trainer_dp $(B)/flat_trainer_fsdp: $(B)/impl/plain.o $(PRIV_H) tests/vs_private.h
$(IMPL_SHARED:%=$(B)/%_nt): $(B)/impl/nt.o $(PRIV_H) tests/vs_private.h
$(IMPL_SHARED:%=$(B)/%_mpi): $(B)/impl/mpi.o $(PRIV_H) tests/vs_private.h
$(B)/impl/plain.o: tests/vs_impl.c $(HEADERS) | $(B)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -c -o $@ $<
$(B)/impl/nt.o: tests/vs_impl.c $(HEADERS) | $(B)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) -DVESCALE_NT_MIN=0 -c -o $@ $<
$(B)/impl/mpi.o: tests/vs_impl.c $(HEADERS) | $(B)
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(SAN) -DVESCALE_MPI -c -o $@ $<
# ---------------------------------------------------------------------------------

$(B)/%: tests/%.c $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))

$(B)/%_nt: tests/%.c $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) -DVESCALE_NT_MIN=0,nt,$(LDLIBS))

$(B)/%_mpi: tests/%.c $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(MPICC) $(CFLAGS) $(SAN) -DVESCALE_MPI,mpi,$(LDLIBS))

# The DDP kernels: NVRTC compiles their device source here when it is installed
# (no GPU needed for that).
HAVE_NVRTC := $(if $(wildcard $(CUDA)/include/nvrtc.h),1)

# test_nccl.c (make test-gpu's) over the strict CUDA + NCCL stand-in (tests/strict/):
# the NCCL transport, DDP, layouts, TP, init and checkpoints on 8 simulated GPUs,
# with the CUDA toolkit's own headers and NVRTC, and no GPU, libcudart or libnccl.
HAVE_STRICT := $(if $(HAVE_NVRTC),$(if $(wildcard $(CUDA)/include/nccl.h),1))
STRICT_H := tests/strict/vs_strict.h tests/strict/vs_strict_nccl.h tests/strict/vs_strict_race.h tests/strict/vs_strict_clock.h
STRICT_CFLAGS = -D_GNU_SOURCE -DVESCALE_NCCL -DVS_STRICT -isystem $(CUDA)/include $(if $(filter-out $(CUDA)/include,$(NCCL_INCLUDE)),-isystem $(NCCL_INCLUDE)) -L$(CUDA)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA)/lib64
# The library for NCCL compiled once ($(B)/impl/strict.o, without the stand-in): each
# program below compiles the stand-in itself (tests/strict/vs_strict.h keeps its state
# in statics of the program's unit and runs the library's private host kernels), and
# the stand-in's cuda* and nccl* functions are what the object's calls link to.
$(B)/impl/strict.o: tests/vs_impl.c $(HEADERS) | $(B)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS) -c -o $@ $<
# ... and the stand-in itself compiled once too (tests/strict/vs_strict.c): the programs
# that link the strict object get vs_strict.h's interface only (VS_STRICT_LINKED)
$(B)/impl/standin.o: tests/strict/vs_strict.c $(STRICT_H) $(PRIV_H) tests/vs_private.h | $(B)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS) -iquote $(B)/priv -include tests/vs_private.h -c -o $@ $<
# (test_strict_shrink reads the stand-in's communicator struct: it compiles the stand-in in)
STRICT_WHOLE := test_strict_shrink
IMPL_FLAGS_strict = $(if $(filter $(notdir $(basename $<)),$(STRICT_WHOLE)),,-DVS_STRICT_LINKED)
IMPL_OBJS_strict = $(if $(filter $(notdir $(basename $<)),$(STRICT_WHOLE)),,$(B)/impl/standin.o)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_nccl_strict)
$(B)/test_nccl_strict: tests/test_nccl.c $(STRICT_H) tests/ddp_model.h tests/device_layout_cases.h $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# The negative suite (tests/strict/neg/, run by tests/strict/neg.sh): programs with
# one deliberate GPU bug each, which the stand-in must report by class, and a control.
STRICT_NEG := $(patsubst tests/strict/neg/%.c,$(B)/strict_neg_%,$(wildcard tests/strict/neg/*.c))
TESTS   += $(if $(HAVE_STRICT),$(STRICT_NEG))
$(B)/strict_neg_%: tests/strict/neg/%.c tests/strict/neg/neg.h $(STRICT_H) $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# DDP on the trainer's own device memory (tests/test_ddp_ext.c over the same stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ddp_ext_strict)
$(B)/test_ddp_ext_strict: tests/test_ddp_ext.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# HSDP on device buffers (tests/test_ddp_hsdp.c over the same stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ddp_hsdp_strict)
$(B)/test_ddp_hsdp_strict: tests/test_ddp_hsdp.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# vs_ddp_step's own sync and clip on device memory (tests/test_ddp_step.c over the same stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ddp_step_strict)
$(B)/test_ddp_step_strict: tests/test_ddp_step.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
$(B)/test_ddp_step_strict: $(B)/impl/strict.o $(B)/impl/standin.o $(PRIV_H) tests/vs_private.h # (as STRICT_PROGS)
# ZeRO-3 on device buffers (tests/test_ddp_zero3.c over the same stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ddp_zero3_strict)
$(B)/test_ddp_zero3_strict: tests/test_ddp_zero3.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# ZeRO-3's misuse of a gathered group on device buffers: VESCALE_DEBUG=params' canaries (tests/test_ddp_zero3_debug.c)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ddp_zero3_debug_strict)
$(B)/test_ddp_zero3_debug_strict: tests/test_ddp_zero3_debug.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# checkpoints over NCCL while the trainer's collectives run (tests/test_ckpt_nccl.c), same stand-in
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ckpt_nccl)
$(B)/test_ckpt_nccl: tests/test_ckpt_nccl.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# the pipeline engine's NCCL path over the same stand-in (PP 2 and 4, DP 2 x PP 2, every schedule)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_pipe_nccl)
$(B)/test_pipe_nccl: tests/test_pipe_nccl.c tests/pipe_models.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# a trainer's own NCCL beside vescale's (issue 22): raw handles, the file rendezvous,
# the row-parallel bias on device buffers, same stand-in
TESTS   += $(if $(HAVE_STRICT),$(B)/test_nccl_vendor)
$(B)/test_nccl_vendor: tests/test_nccl_vendor.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# vescale.h's high-level API on device buffers (issue 21), same stand-in
TESTS   += $(if $(HAVE_STRICT),$(B)/test_train_nccl)
$(B)/test_train_nccl: tests/test_train_nccl.c tests/lighthouse_tool.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B) $(B)/vescale-lighthouse
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# the example GPT (examples/gpt.h) on 8 simulated GPUs: its units as gpt_kernels.h's
# kernels on the compute stream, PP2 x DP2 x TP2 and DP2 x TP2 + SP against one host
# rank, bf16 parameters (same stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_gpt_nccl)
$(B)/test_gpt_nccl: tests/test_gpt_nccl.c tests/gpt_strict_kernels.h examples/gpt.h examples/gpt_kernels.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# examples/train_gpt.c --device cuda end to end on the same stand-in (tests/run.sh runs it)
TESTS   += $(if $(HAVE_STRICT),$(B)/train_gpt_strict)
$(B)/train_gpt_strict: tests/train_gpt_strict.c examples/train_gpt.c tests/gpt_strict_kernels.h examples/gpt.h examples/gpt_kernels.h $(STRICT_H) $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# examples/gpt_kernels.h's kernels NVRTC-compiled and launched over the same stand-in,
# against their host build and examples/gpt.h (the plain build, $(B)/test_gpt_kernels,
# checks the host side without CUDA)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_gpt_kernels_strict)
$(B)/test_gpt_kernels_strict: tests/test_gpt_kernels.c tests/gpt_strict_kernels.h examples/gpt_kernels.h examples/gpt.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# the stand-in's clock against a GPU (issue 35.4): bench/gpu_calib.c's set of kernels, copies, a
# one-rank all-reduce and the GPT's step, timed by the stand-in (here: the modelled side, small
# shapes in make test; tests/gpu/run.sh runs the bench shapes on a GPU and on the stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_gpu_calib)
$(B)/test_gpu_calib: tests/test_gpu_calib.c bench/gpu_calib.c examples/gpt.h examples/gpt_kernels.h tests/gpt_strict_kernels.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# the steady-state counts bench/strict_counts.c measures, the targets met enforced
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_counts)
$(B)/test_strict_counts: tests/test_strict_counts.c bench/strict_counts.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# ZeRO-3 through vs_parallelize: no device allocation, one host wait in every step after the first
TESTS   += $(if $(HAVE_STRICT),$(B)/test_train_counts)
$(B)/test_train_counts: tests/test_train_counts.c bench/train_counts.c examples/gpt.h examples/gpt_kernels.h tests/gpt_strict_kernels.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# vs_parallelize's DP reduction overlaps the backward (issue 35.2; bench/gpu_model.c's runs, cost-only)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_train)
$(B)/test_strict_train: tests/test_strict_train.c bench/gpu_model.c examples/gpt.h examples/gpt_kernels.h tests/gpt_strict_kernels.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# DDP at DP 1: no reduction call, the same parameters (tests/test_ddp_solo.c over the stand-in)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_ddp_solo)
$(B)/test_ddp_solo: tests/test_ddp_solo.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# vescale's control code on 64 simulated GPUs in cost-only mode (make test-long: 256 and 1,024)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_scale)
$(B)/test_strict_scale: tests/test_strict_scale.c bench/rank_bytes.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# cost-only mode gives every rank the same control values: a flag's all-reduce, a checkpoint's agreement, a step's skip
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_costonly)
$(B)/test_strict_costonly: tests/test_strict_costonly.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# the stand-in's virtual time (tests/strict/vs_strict_clock.h): hand-worked timelines, formulas, the spec
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_clock)
$(B)/test_strict_clock: tests/test_strict_clock.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# what the clock shows about vescale (issue 35.2): DDP overlap, the pipeline engine against its simulator, host-bound steps
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_model)
$(B)/test_strict_model: tests/test_strict_model.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# the stand-in's ncclCommRevoke and ncclCommShrink: ranks that die, the survivors' recovery
TESTS   += $(if $(HAVE_STRICT),$(B)/test_strict_shrink)
$(B)/test_strict_shrink: tests/test_strict_shrink.c $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# NCCL jobs of processes that survive a rank: the elastic directory's agreement (issue 24)
TESTS   += $(if $(HAVE_STRICT),$(B)/test_elastic_procs)
$(B)/test_elastic_procs: tests/test_elastic_procs.c tests/vt_dir.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# a lighthouse that misbehaves beside a healthy job (issue 33): stopped, black-holed, slow
# readers, 2,000 idle connections, a flood of values, a token; it runs $(B)/vescale-lighthouse
TESTS   += $(if $(HAVE_STRICT),$(B)/test_lighthouse)
$(B)/test_lighthouse: tests/test_lighthouse.c tests/lighthouse_tool.h tests/vt_dir.h $(STRICT_H) $(HEADERS) tests/vs_test.h | $(B) $(B)/vescale-lighthouse
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
# every program of the stand-in links the strict object (test_nccl_strict compiles its own: IMPL_OWN)
STRICT_PROGS := $(B)/test_ddp_ext_strict $(B)/test_ddp_hsdp_strict $(B)/test_ddp_zero3_strict $(B)/test_ddp_zero3_debug_strict $(B)/test_ckpt_nccl $(B)/test_pipe_nccl $(B)/test_nccl_vendor \
                $(B)/test_train_nccl $(B)/test_gpt_nccl $(B)/train_gpt_strict $(B)/test_gpt_kernels_strict \
                $(B)/test_gpu_calib $(B)/gpu_calib $(B)/test_strict_counts $(B)/test_train_counts $(B)/test_strict_clock $(B)/test_strict_model $(B)/test_strict_train $(B)/test_ddp_solo $(B)/test_strict_scale $(B)/test_strict_costonly $(B)/test_strict_shrink $(B)/test_elastic_procs $(B)/test_lighthouse $(STRICT_NEG)
$(STRICT_PROGS): $(B)/impl/strict.o $(B)/impl/standin.o $(PRIV_H) tests/vs_private.h
$(B)/test_ddp_kernels: tests/test_ddp_kernels.c $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) $(if $(HAVE_NVRTC),-DVESCALE_NVRTC -isystem $(CUDA)/include -L$(CUDA)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA)/lib64) -o $@ $< $(if $(HAVE_NVRTC),-lnvrtc) $(LDLIBS)

# The kernel texts' device meaning (CUDA's vocabulary emulated on host threads) against their host builds.
$(B)/test_kernels_device: tests/test_kernels_device.c examples/gpt_kernels.h $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< $(LDLIBS)

# DDP's device path over a stand-in CUDA runtime (tests/mock), NVRTC for real.
$(B)/test_ddp_device: tests/test_ddp_device.c tests/mock/cuda_runtime.h tests/mock/mock_device.h tests/ddp_model.h $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) $(if $(HAVE_NVRTC),-DVESCALE_NVRTC -Itests/mock -isystem $(CUDA)/include -L$(CUDA)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA)/lib64) -o $@ $< $(if $(HAVE_NVRTC),-lnvrtc) $(LDLIBS)

# every allocation through the hooks: the C allocator's entry points are wrapped,
# so a call from the library's code is counted (tests/test_alloc.c)
WRAP_ALLOC := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=posix_memalign
$(B)/test_alloc: tests/test_alloc.c $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(WRAP_ALLOC) $(LDLIBS))
# a save's commit order (tests/test_ckpt_durable.c): fsync and the calls that rename
# or delete are wrapped, so each call from the library's code is logged with its path
WRAP_DURABLE := -Wl,--wrap=fsync,--wrap=rename,--wrap=renameat,--wrap=unlinkat
$(B)/test_ckpt_durable: tests/test_ckpt_durable.c $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(WRAP_DURABLE) $(LDLIBS))
# Layouts, TP and init on device buffers over the same stand-in runtime, NVRTC for real.
$(B)/test_device_layout: tests/test_device_layout.c tests/device_layout_cases.h tests/mock/cuda_runtime.h tests/mock/mock_device.h $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) $(if $(HAVE_NVRTC),-DVESCALE_NVRTC -Itests/mock -isystem $(CUDA)/include -L$(CUDA)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA)/lib64) -o $@ $< $(if $(HAVE_NVRTC),-lnvrtc) $(LDLIBS)

# The pipeline engine's device path over the same stand-in runtime (no kernels, no NVRTC).
$(B)/test_pipe_device: tests/test_pipe_device.c tests/pipe_models.h tests/mock/cuda_runtime.h tests/mock/mock_device.h $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) -Itests/mock -o $@ $< $(LDLIBS)

# The example GPT (examples/gpt.h) unit by unit: one rank, TP thread ranks.
$(B)/test_gpt: tests/test_gpt.c examples/gpt.h $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
$(B)/test_train_gpt: tests/test_train_gpt.c examples/gpt.h $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
$(B)/test_gpt_kernels: tests/test_gpt_kernels.c examples/gpt_kernels.h examples/gpt.h $(HEADERS) tests/vs_test.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))

# vescale_ckpt.h's device buffers over the same stand-in runtime (its CUDA copies forced on).
$(B)/test_ckpt_device: tests/test_ckpt_device.c tests/mock/cuda_runtime.h tests/mock/mock_device.h $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) -Itests/mock -o $@ $< $(LDLIBS)

# the MPI fault suite (tests/faults_mpi.sh launches it, one mpirun per fault): an MPI
# build whenever the MPI tests are built (MPI_TESTS= as in test-tsan gives the skip build)
$(B)/test_faults_mpi: tests/test_faults_mpi.c $(HEADERS) tests/vs_test.h $(if $(MPI_TESTS),$(B)/impl/mpi.o) | $(B)
	$(call BUILD,$(if $(MPI_TESTS),$(MPICC) -DVESCALE_MPI,$(CC)) $(CFLAGS) $(SAN),$(if $(MPI_TESTS),mpi,plain),$(LDLIBS))

$(B)/demo: examples/demo.c $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

# --- examples/mlp_dp_tp.c: the first trainer (DP2 x TP2 beside one rank) ---------
# built by `make`, run briefly by `make test`; the MPI build runs under mpirun -np 4
EXAMPLES := $(B)/mlp_dp_tp $(B)/pipe_mlp $(B)/train_gpt $(B)/flat_trainer $(B)/flat_trainer_dp_tp $(B)/flat_trainer_dp $(B)/flat_trainer_fsdp $(if $(MPI_TESTS),$(B)/mlp_dp_tp_mpi $(B)/train_gpt_mpi)
all: $(EXAMPLES)
# the examples and the checkpoint tool alone (`make` also builds every test)
.PHONY: examples
examples: $(EXAMPLES) $(B)/demo $(B)/vescale-ckpt $(B)/vescale-lighthouse
test-bins: $(EXAMPLES)
$(B)/mlp_dp_tp: examples/mlp_dp_tp.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
$(B)/train_gpt: examples/train_gpt.c examples/gpt.h $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
$(B)/train_gpt_mpi: examples/train_gpt.c examples/gpt.h $(HEADERS) | $(B)
	$(call BUILD,$(MPICC) $(CFLAGS) $(SAN) -DVESCALE_MPI,mpi,$(LDLIBS))
$(B)/pipe_mlp: examples/pipe_mlp.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
$(B)/mlp_dp_tp_mpi: examples/mlp_dp_tp.c $(HEADERS) | $(B)
	$(call BUILD,$(MPICC) $(CFLAGS) $(SAN) -DVESCALE_MPI,mpi,$(LDLIBS))
# examples/flat_trainer.c (issue 22): a plain-C trainer with flat buffers (no vescale), and
# the same file with -DDP_TP, its vescale port (DP x TP beside one rank), and with -DDP its
# DP-only port; make test runs
# tests/flat_trainer_check.sh, `make flat-diff` prints the diff between the two forms
$(B)/flat_trainer: examples/flat_trainer.c | $(B)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< -lm
$(B)/flat_trainer_dp_tp: examples/flat_trainer.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) -DDP_TP,plain,$(LDLIBS))
$(B)/flat_trainer_dp: examples/flat_trainer.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) -DDP,plain,$(LDLIBS))
# ... and with -DFSDP its ZeRO-3 port (gather/release around its own layer loop, issue 34)
$(B)/flat_trainer_fsdp: examples/flat_trainer.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) -DFSDP,plain,$(LDLIBS))
.PHONY: flat-diff
flat-diff:
	@bash tests/flat_trainer_diff.sh
# ---------------------------------------------------------------------------------

# --- tools/vescale-ckpt (issue 11): ls / verify / export / diff of checkpoints ----
# built by `make`; `make test` runs tests/ckpt_tool.sh on hand-made checkpoints
all: $(B)/vescale-ckpt
test-bins: $(B)/vescale-ckpt
$(B)/test_ckpt_format: tests/ckpt_handmade.h
# the DDP tests' shared builders (tests/ddp_common.h), thread and stand-in builds
DDP_COMMON := test_ddp_zero3 test_ddp_zero3_debug test_ddp_ext test_ddp_step test_ddp_hsdp
$(DDP_COMMON:%=$(B)/%) $(DDP_COMMON:%=$(B)/%_strict) $(B)/test_ckpt_zero3: tests/ddp_common.h bench/rank_bytes.h
$(B)/vescale-ckpt: tools/vescale-ckpt.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
# tools/vescale-shards: token shards (vs_data_open's format) from any text; make test
# trains examples/train_gpt.c --data on shards it writes from README.md
all: $(B)/vescale-shards
test-bins: $(B)/vescale-shards
$(B)/vescale-shards: tools/vescale-shards.c | $(B)
	$(CC) $(CFLAGS) $(SAN) -o $@ $<
# tools/vescale-lighthouse: the store of an elastic NCCL job whose ranks share no directory
# (issue 24); make test starts it and runs test_elastic_procs' lighthouse cases against it
all: $(B)/vescale-lighthouse
test-bins: $(B)/vescale-lighthouse
$(B)/vescale-lighthouse: tools/vescale-lighthouse.c $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN),plain,$(LDLIBS))
# ---------------------------------------------------------------------------------

# The main job: the GPT example (examples/train_gpt.c) trained on 8 thread ranks as
# PP2 x DP2 x TP2 beside one rank, after the planner's explanation of the plan it
# runs (a profile of this machine, then vs_plan_explain_for); saved, then resumed on DP4 x TP2
# with sequence parallelism beside one rank; then HSDP (ZeRO-3 over DPS2, replicated
# over DPR2, x TP2) beside one rank.
run: $(B)/train_gpt
	rm -rf $(B)/run_ckpt
	./$(B)/train_gpt --mesh 2x2x2 --explain --steps 20 --save $(B)/run_ckpt/step-000020
	./$(B)/train_gpt --mesh 1x4x2 --sp --steps 10 --resume auto --ckpt-dir $(B)/run_ckpt
	./$(B)/train_gpt --mesh 1x4x2 --zero 3 --dp-shard 2 --steps 5

# The same GPT on the GPUs (examples/train_gpt.c --device cuda): built with nvcc
# against CUDA and NCCL (as make test-gpu builds), run on every visible GPU (NCCL,
# one rank per GPU; gpt.h's units as examples/gpt_kernels.h's kernels) beside the
# one-rank host run, the same per-step table as make run; f32, then bf16
# parameters. Without nvcc or NCCL's header it says so and exits 0; the program
# itself says so and exits 0 where no GPU is visible.
.PHONY: run-gpu
run-gpu: | $(B)
	@if ! command -v $(NVCC) >/dev/null 2>&1 || [ ! -f "$(NCCL_INCLUDE)/nccl.h" ]; then \
	    echo "make run-gpu: no CUDA toolchain here ($(NVCC), $(NCCL_INCLUDE)/nccl.h): nothing to run on a GPU"; exit 0; fi; \
	set -e; \
	$(MAKE) --no-print-directory $(B)/train_gpt_gpu; \
	./$(B)/train_gpt_gpu --device cuda --steps 20; \
	./$(B)/train_gpt_gpu --device cuda --steps 10 --dtype bf16

# The README's test command (and .ci/run's).
# The fuzz harnesses run FUZZ_SECONDS each inside `make test`, one at a time on one core
# beside the other stages (0: not at all; at 15 the fuzz stage takes some 3 minutes, about
# as long as the other stages on the other core of the 2-core CI machine; `make fuzz`
# runs 60 each, two at a time).
FUZZ_SECONDS ?= 15
# The binaries are built first by a sub-make with one job per core (the builds were
# half of a CI run on 2 cores); command-line variables (B, OPT, SAN, ...) pass down.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
.PHONY: test-bins
test-bins: $(TESTS) $(MPI_TESTS)
test:
	$(MAKE) --no-print-directory -j$(JOBS) test-bins
	B=$(B) MPIRUN="$(MPIRUN)" COMPILE_CHECK=$(COMPILE_CHECK) FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/run.sh

# the long sweeps (not in make test): DDP checkpoints between every two of 24 (mesh, ZeRO stage)
# pairs (tests/test_ckpt_zero3.c, issue 34), issue 24's random kills, 1000 on thread ranks (500 more
# on HSDP, tests/test_train_elastic_z3.c, issue 34), 100 on
# simulated GPUs (ncclCommShrink), 100 on processes (an elastic directory) and 30 over a
# lighthouse, ten a process (the stand-in's race detector slows down with every thread a
# process has made: one process of 100 kills crawls after about 60); vescale's control code
# on 256 and 1,024 simulated GPUs in cost-only mode (tests/test_strict_scale.c; the example GPT
# through vs_parallelize on 1,024 alone: ~14 min on 2 cores, the stand-in's hang limit raised)
test-long: $(B)/test_elastic_train $(B)/test_train_elastic_z3 $(if $(HAVE_STRICT),$(B)/test_train_nccl $(B)/test_strict_scale) $(B)/test_ckpt_zero3
	VS_ELASTIC_KILLS=1000 $(B)/test_elastic_train
	VS_ELASTIC_Z3_KILLS=500 $(B)/test_train_elastic_z3
	VS_CKPT_ZERO3_ALL=1 $(B)/test_ckpt_zero3
	$(if $(HAVE_STRICT),VS_SCALE_RANKS=256 $(B)/test_strict_scale)
	$(if $(HAVE_STRICT),VS_SCALE_RANKS=1024 VS_SCALE_NUMEL=262144 $(B)/test_strict_scale)
	$(if $(HAVE_STRICT),VS_SCALE_RANKS=1024 VS_SCALE_ONLY=gpt VS_STRICT_HANG_S=900 $(B)/test_strict_scale)
	$(if $(HAVE_STRICT),for f in 0 10 20 30 40 50 60 70 80 90; do \
	    VS_ELASTIC_STRICT_ONLY=1 VS_ELASTIC_STRICT_FIRST=$$f VS_ELASTIC_STRICT_KILLS=$$((f + 10)) $(B)/test_train_nccl || exit 1; done)
	$(if $(HAVE_STRICT),for f in 0 10 20 30 40 50 60 70 80 90; do \
	    VS_ELASTIC_PROCS=1 VS_ELASTIC_STRICT_ONLY=1 VS_ELASTIC_STRICT_FIRST=$$f VS_ELASTIC_STRICT_KILLS=$$((f + 10)) $(B)/test_train_nccl || exit 1; done)
	$(if $(HAVE_STRICT),for f in 0 10 20; do \
	    VS_ELASTIC_PROCS=2 VS_ELASTIC_STRICT_ONLY=1 VS_ELASTIC_STRICT_FIRST=$$f VS_ELASTIC_STRICT_KILLS=$$((f + 10)) $(B)/test_train_nccl || exit 1; done)

# ranks on several hosts (issue 33.2, not in make test): four network namespaces joined by a
# bridge, one MPI rank on each over TCP; a late split's vs_world_free, a partition, a
# stopped rank, a slow link (tc). Root only: otherwise it prints a skip line.
test-hosts: $(B)/test_faults_mpi $(if $(HAVE_STRICT),$(B)/test_lighthouse)
	bash tests/hosts.sh $(B)/test_faults_mpi
	$(if $(HAVE_STRICT),B=$(B) bash tests/hosts_lighthouse.sh)

test-asan:
	$(MAKE) test B=build-asan OPT="-O1 -g" SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" COMPILE_CHECK=0 FUZZ_SECONDS=0

# (TSan's shadow memory flushed every 3 s and its per-thread history at its smallest: with its
# defaults test_strict_model, whose ranks make threads and device buffers by the thousand, passed
# 17 GB and was killed; so, in one process, it passed at 2.4 GB. A TSAN_OPTIONS of yours comes after, and wins.)
test-tsan:
	TSAN_OPTIONS="flush_memory_ms=3000 history_size=0 $$TSAN_OPTIONS" $(MAKE) test B=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" MPI_TESTS= COMPILE_CHECK=0 FUZZ_SECONDS=0

# NCCL on a real GPU, one rank per GPU (needs a CUDA device). NCCL_INCLUDE and
# NCCL_LIB (below) point at an NCCL outside the CUDA toolkit (e.g. pip's nvidia-nccl).
# (each binary its own target: make -j builds them side by side, as tests/gpu/run.sh does)
NVCC_NCCL = $(NVCC) -O2 -x cu -DVESCALE_NCCL -I. -I$(NCCL_INCLUDE) -L$(NCCL_LIB) -Xlinker -rpath=$(NCCL_LIB)
GPU_TESTS := $(B)/test_nccl $(B)/test_pipe_nccl_gpu $(B)/test_ckpt_nccl_gpu $(B)/test_gpt_kernels_gpu
$(B)/test_nccl: tests/test_nccl.c tests/ddp_model.h tests/device_layout_cases.h $(HEADERS) tests/vs_test.h | $(B)
	$(NVCC_NCCL) -o $@ $< -lnccl -lnvrtc -lpthread
$(B)/%_nccl_gpu: tests/%_nccl.c $(HEADERS) tests/vs_test.h | $(B)
	$(NVCC_NCCL) -o $@ $< -lnccl -lnvrtc -lpthread
$(B)/test_gpt_kernels_gpu: tests/test_gpt_kernels.c examples/gpt.h examples/gpt_kernels.h $(HEADERS) tests/vs_test.h | $(B)
	$(NVCC_NCCL) -o $@ $< -lnccl -lnvrtc -lpthread
$(B)/train_gpt_gpu: examples/train_gpt.c examples/gpt.h examples/gpt_kernels.h $(HEADERS) | $(B)
	$(NVCC_NCCL) -o $@ $< -lnccl -lnvrtc -lpthread
test-gpu: $(GPU_TESTS)
	./$(B)/test_nccl
	./$(B)/test_pipe_nccl_gpu
	./$(B)/test_ckpt_nccl_gpu
	./$(B)/test_gpt_kernels_gpu

compile-check:
	bash tests/compile_check.sh

$(B)/bench_collectives: bench/collectives.c $(HEADERS) | $(B)
	$(MPICC) -std=c99 -O2 $(WARN) -D_POSIX_C_SOURCE=200809L -I. -DVESCALE_MPI -o $@ $< $(LDLIBS)

bench: $(B)/bench_collectives
	B=$(B) MPIRUN="$(MPIRUN)" bash bench/run_collectives.sh

bench-redistribute:
	B=$(B) bash bench/run_redistribute.sh

bench-ddp: $(B)/bench_ddp_ext $(B)/bench_ddp_zero3 $(B)/bench_ddp_memory
	B=$(B) bash bench/run_ddp.sh
	$(B)/bench_ddp_zero3
	$(B)/bench_ddp_memory
	$(B)/bench_ddp_ext --dp 2
	$(B)/bench_ddp_ext --dp 4
	$(B)/bench_ddp_ext --dp 2 --zero 1
	$(B)/bench_ddp_ext --dp 4 --zero 1
	$(B)/bench_ddp_ext --dp 2 --zero 1 --step 3
	$(B)/bench_ddp_ext --dp 2 --zero 0 --step 3
	$(B)/bench_ddp_ext --dp 2 --zero 1 --step 3 --one-call 1
# a trainer's own flat buffers: staged copy vs grouped in place vs DDP's own buckets
# (the sync alone, or with --step whole steps whose ZeRO-1 gathers overlap the next forward)
$(B)/bench_ddp_ext: bench/ddp_ext.c $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
# ZeRO-3 (issue 34): a step's gathers and reduce-scatters against a modelled compute,
# prefetch 1 vs 0; the example GPT's memory a rank under ZeRO-1/2/3 and HSDP
$(B)/bench_ddp_zero3: bench/ddp_zero3.c bench/bench_util.h $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
$(B)/bench_ddp_memory: bench/ddp_memory.c bench/rank_bytes.h $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
# (tests/test_ddp_memory.c asserts the bounds on bench/ddp_memory.c's measure)
$(B)/test_ddp_memory: bench/ddp_memory.c bench/rank_bytes.h

# host syncs, device allocations, copies, libraries, kernels and NCCL operations per
# steady-state step of the NCCL path, counted over the strict stand-in (no GPU)
$(B)/bench_strict_counts: bench/strict_counts.c $(STRICT_H) $(HEADERS) | $(B)
	$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS) -o $@ $< -lnvrtc $(LDLIBS)
# the example GPT's steady step on (simulated) GPUs, counted the same way (make bench-train runs it)
$(B)/bench_train_counts: bench/train_counts.c examples/gpt.h examples/gpt_kernels.h tests/gpt_strict_kernels.h $(STRICT_H) $(HEADERS) | $(B)
	$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS) -o $@ $< -lnvrtc $(LDLIBS)

# the example GPT's steady step on simulated H100s (the strict stand-in's clock, cost-only):
# step, compute, communication (exposed, by kind), bubble and host-bound idle per mesh and
# schedule, with the kernels' declared costs and (--tensor) GEMMs and attention on tensor cores;
# --published / --plan1024: real shapes against the planner (bench/RESULTS.md)
$(B)/bench_gpu_model: bench/gpu_model.c examples/gpt.h examples/gpt_kernels.h tests/gpt_strict_kernels.h $(STRICT_H) $(HEADERS) \
                      $(B)/impl/strict.o $(B)/impl/standin.o $(PRIV_H) tests/vs_private.h | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
.PHONY: bench-gpu-model
bench-gpu-model: $(B)/bench_gpu_model
	$(B)/bench_gpu_model
	$(B)/bench_gpu_model --tensor

# bench/gpu_calib.c (issue 35.4): the same set of operations timed on the stand-in ($(B)/gpu_calib,
# modelled) and on a GPU ($(B)/gpu_calib_gpu, nvcc, measured); tests/gpu/run.sh runs both and
# compares them (gpu_calib --compare). make gpu-calib-model prints the stand-in's side here.
$(B)/gpu_calib: bench/gpu_calib.c examples/gpt.h examples/gpt_kernels.h tests/gpt_strict_kernels.h $(STRICT_H) $(HEADERS) | $(B)
	$(call BUILD,$(CC) $(CFLAGS) $(SAN) $(STRICT_CFLAGS),strict,-lnvrtc $(LDLIBS))
$(B)/gpu_calib_gpu: bench/gpu_calib.c examples/gpt.h examples/gpt_kernels.h $(HEADERS) | $(B)
	$(NVCC_NCCL) -o $@ $< -lnccl -lnvrtc -lpthread
.PHONY: gpu-calib-model
gpu-calib-model: $(B)/gpu_calib
	$(B)/gpu_calib --out $(B)/gpu_calib_model.txt

.PHONY: bench-strict
bench-strict:
	B=$(B) bash bench/run_strict_counts.sh

.PHONY: bench-pipe
bench-pipe:
	B=$(B) bash bench/run_pipe.sh

.PHONY: bench-ckpt
bench-ckpt:
	B=$(B) bash bench/run_ckpt.sh

# a checkpoint's metadata at 64, 256 and 1,024 thread ranks: a save's and a load's
# host time and memory a rank (issue 35; bench/RESULTS.md)
.PHONY: bench-ckpt-meta
bench-ckpt-meta: $(B)/bench_ckpt_meta
	$(B)/bench_ckpt_meta
$(B)/bench_ckpt_meta: bench/ckpt_meta.c bench/rank_bytes.h $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)
$(B)/test_ckpt_scale: bench/rank_bytes.h
$(B)/test_train_scale: bench/rank_bytes.h examples/gpt.h

# the data loader (vescale.h >>data) behind a modelled step: its wait per step with and without read-ahead
.PHONY: bench-data
bench-data: $(B)/bench_data
	$(B)/bench_data
$(B)/bench_data: bench/data.c bench/bench_util.h $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

# issue 24's figures: failure -> first step on the smaller mesh against a checkpoint
# restart, and a replacement's state against memcpy (the example GPT on 8 thread ranks)
.PHONY: bench-elastic-mpi
# issue 24 on processes: an MPI job with ULFM against its checkpoint restart (needs an
# Open MPI 5: VESCALE_ULFM_MPI=<prefix>, as .ci/run installs at /opt/vescale-ulfm)
bench-elastic-mpi:
	B=$(B) bash bench/elastic_mpi.sh
.PHONY: bench-elastic
bench-elastic: $(B)/bench_elastic
	$(B)/bench_elastic
$(B)/bench_elastic: bench/elastic.c bench/bench_util.h examples/gpt.h examples/gpt_kernels.h $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

.PHONY: bench-train
bench-train:
	B=$(B) bash bench/run_train.sh

clean:
	rm -rf build build-asan build-tsan

# libFuzzer harnesses (tests/fuzz/), built with clang: each runs FUZZ_SECONDS (60).
.PHONY: fuzz
fuzz:
	B=$(B) FUZZ_SECONDS=$${FUZZ_SECONDS:-60} bash tests/fuzz/run.sh

# --- install (issue 9): headers, pkg-config files, CMake package -----------------
# make install [PREFIX=/usr/local] [DESTDIR=stage] [CUDA=...] [NCCL_INCLUDE=...] [NCCL_LIB=...]
#   $(INCLUDEDIR)/vescale*.h
#   $(BINDIR)/vescale-ckpt vescale-lighthouse
#   $(LIBDIR)/pkgconfig/vescale.pc vescale-mpi.pc vescale-nccl.pc
#   $(LIBDIR)/cmake/vescale/vescale-config.cmake vescale-config-version.cmake
# Nothing is built: the library is the headers.
PREFIX      ?= /usr/local
INCLUDEDIR  ?= $(PREFIX)/include
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
NCCL_INCLUDE ?= $(CUDA)/include
NCCL_LIB    ?= $(CUDA)/lib64
VERSION      = $(shell sed -n 's/^\#define VESCALE_VERSION_STRING "\(.*\)"/\1/p' vescale_mesh.h)
# vescale-mpi.pc: Requires the MPI's own pkg-config module when there is one
# (Open MPI: mpi-c, MPICH: mpich), else carries the flags mpicc reports.
MPI_PC      ?= $(shell for m in mpi-c ompi-c mpich; do pkg-config --exists $$m 2>/dev/null && { echo $$m; break; }; done)
MPI_CFLAGS  ?= $(if $(MPI_PC),,$(shell $(MPICC) --showme:compile 2>/dev/null))
MPI_LIBS    ?= $(if $(MPI_PC),,$(or $(shell $(MPICC) --showme:link 2>/dev/null),-lmpi))
_VS_SUBST    = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
               -e 's|@VERSION@|$(VERSION)|g' -e 's|@CUDA@|$(CUDA)|g' \
               -e 's|@NCCL_INCLUDE@|$(NCCL_INCLUDE)|g' -e 's|@NCCL_LIB@|$(NCCL_LIB)|g' \
               -e 's|@MPI_PC@|$(MPI_PC)|g' -e 's|@MPI_CFLAGS@|$(MPI_CFLAGS)|g' -e 's|@MPI_LIBS@|$(MPI_LIBS)|g'
_VS_PC       = vescale vescale-mpi vescale-nccl

.PHONY: install uninstall install-check
install: $(B)/vescale-ckpt $(B)/vescale-lighthouse
	@test -n "$(VERSION)" || { echo "install: no VESCALE_VERSION_STRING in vescale_mesh.h"; exit 1; }
	install -d "$(DESTDIR)$(INCLUDEDIR)" "$(DESTDIR)$(LIBDIR)/pkgconfig" "$(DESTDIR)$(LIBDIR)/cmake/vescale" "$(DESTDIR)$(BINDIR)"
	install -m 644 $(HEADERS) "$(DESTDIR)$(INCLUDEDIR)/"
	install -m 755 $(B)/vescale-ckpt $(B)/vescale-lighthouse "$(DESTDIR)$(BINDIR)/"
	for f in $(_VS_PC); do $(_VS_SUBST) pkg/$$f.pc.in > "$(DESTDIR)$(LIBDIR)/pkgconfig/$$f.pc" || exit 1; done
	$(_VS_SUBST) cmake/vescale-config.cmake.in > "$(DESTDIR)$(LIBDIR)/cmake/vescale/vescale-config.cmake"
	$(_VS_SUBST) cmake/vescale-config-version.cmake.in > "$(DESTDIR)$(LIBDIR)/cmake/vescale/vescale-config-version.cmake"

uninstall:
	rm -f $(addprefix "$(DESTDIR)$(INCLUDEDIR)"/,$(HEADERS)) "$(DESTDIR)$(BINDIR)/vescale-ckpt" "$(DESTDIR)$(BINDIR)/vescale-lighthouse"
	rm -f $(foreach f,$(_VS_PC),"$(DESTDIR)$(LIBDIR)/pkgconfig/$(f).pc")
	rm -f "$(DESTDIR)$(LIBDIR)/cmake/vescale/vescale-config.cmake" "$(DESTDIR)$(LIBDIR)/cmake/vescale/vescale-config-version.cmake"
	-rmdir "$(DESTDIR)$(LIBDIR)/cmake/vescale" 2>/dev/null

# installs into a temporary prefix and builds consumers through pkg-config and CMake
install-check:
	bash tests/install_check.sh
