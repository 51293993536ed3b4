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

TESTS   := $(patsubst tests/%.c,$(B)/%,$(filter-out tests/test_nccl.c,$(wildcard tests/test_*.c)))
# collectives and layouts again with every copy streamed (non-temporal path)
TESTS   += $(B)/test_collectives_nt $(B)/test_layout_nt
# tests that also run with ranks as MPI processes
MPI_NAMES := collectives mesh errors layout ddp_procs
MPI_TESTS := $(if $(HAVE_MPI),$(foreach t,$(MPI_NAMES),$(if $(wildcard tests/test_$(t).c),$(B)/test_$(t)_mpi)))

.PHONY: all run test test-asan test-tsan test-gpu bench bench-redistribute bench-ddp compile-check clean
all: $(TESTS) $(MPI_TESTS) $(B)/demo

$(B):
	@mkdir -p $(B)

$(B)/%: tests/%.c $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< $(LDLIBS)

$(B)/%_nt: tests/%.c $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) -DVESCALE_NT_MIN=0 -o $@ $< $(LDLIBS)

$(B)/%_mpi: tests/%.c $(HEADERS) tests/vs_test.h | $(B)
	$(MPICC) $(CFLAGS) $(SAN) -DVESCALE_MPI -o $@ $< $(LDLIBS)

# The DDP kernels: NVRTC compiles their device source here when it is installed
# (no GPU needed for that).
HAVE_NVRTC := $(if $(wildcard $(CUDA)/include/nvrtc.h),1)
$(B)/test_ddp_kernels: tests/test_ddp_kernels.c $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) $(if $(HAVE_NVRTC),-DVESCALE_NVRTC -isystem $(CUDA)/include -L$(CUDA)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA)/lib64) -o $@ $< $(if $(HAVE_NVRTC),-lnvrtc) $(LDLIBS)

# DDP's device path over a stand-in CUDA runtime (tests/mock), NVRTC for real.
$(B)/test_ddp_device: tests/test_ddp_device.c tests/mock/cuda_runtime.h tests/ddp_model.h $(HEADERS) tests/vs_test.h | $(B)
	$(CC) $(CFLAGS) $(SAN) $(if $(HAVE_NVRTC),-DVESCALE_NVRTC -Itests/mock -isystem $(CUDA)/include -L$(CUDA)/lib64 -Wl$(comma)-rpath$(comma)$(CUDA)/lib64) -o $@ $< $(if $(HAVE_NVRTC),-lnvrtc) $(LDLIBS)

# the MPI fault suite (tests/faults_mpi.sh launches it, one mpirun per fault): an MPI
# build whenever the MPI tests are built (MPI_TESTS= as in test-tsan gives the skip build)
$(B)/test_faults_mpi: tests/test_faults_mpi.c $(HEADERS) tests/vs_test.h | $(B)
	$(if $(MPI_TESTS),$(MPICC) -DVESCALE_MPI,$(CC)) $(CFLAGS) $(SAN) -o $@ $< $(LDLIBS)

$(B)/demo: examples/demo.c $(HEADERS) | $(B)
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

# The main job: until the trainer exists, a 2x2x2 mesh on 8 thread ranks.
run: $(B)/demo
	./$(B)/demo

# The README's test command (and .ci/run's).
# The fuzz harnesses run FUZZ_SECONDS each inside `make test` (0: not at all).
FUZZ_SECONDS ?= 30
test: $(TESTS) $(MPI_TESTS)
	B=$(B) MPIRUN="$(MPIRUN)" COMPILE_CHECK=$(COMPILE_CHECK) FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/run.sh

test-asan:
	$(MAKE) test B=build-asan OPT="-O1 -g" SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" COMPILE_CHECK=0 FUZZ_SECONDS=0

test-tsan:
	$(MAKE) test B=build-tsan OPT="-O1 -g" SAN="-fsanitize=thread" MPI_TESTS= COMPILE_CHECK=0 FUZZ_SECONDS=0

# NCCL on a real GPU, 1 rank (needs a CUDA device).
test-gpu: | $(B)
	$(NVCC) -O2 -x cu -DVESCALE_NCCL -I. -o $(B)/test_nccl tests/test_nccl.c -lnccl -lnvrtc -lpthread
	./$(B)/test_nccl

compile-check:
	bash tests/compile_check.sh

$(B)/bench_collectives: bench/collectives.c $(HEADERS) | $(B)
	$(MPICC) -std=c99 -O2 $(WARN) -D_POSIX_C_SOURCE=200809L -I. -DVESCALE_MPI -o $@ $< $(LDLIBS)

bench: $(B)/bench_collectives
	B=$(B) MPIRUN="$(MPIRUN)" bash bench/run_collectives.sh

bench-redistribute:
	B=$(B) bash bench/run_redistribute.sh

bench-ddp:
	B=$(B) bash bench/run_ddp.sh

clean:
	rm -rf build build-asan build-tsan

# libFuzzer harnesses (tests/fuzz/), built with clang: each runs FUZZ_SECONDS (60).
.PHONY: fuzz
fuzz:
	B=$(B) FUZZ_SECONDS=$${FUZZ_SECONDS:-60} bash tests/fuzz/run.sh
