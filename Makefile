# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: deps build demo test lint unit integration bench clean oci-validate functionbench functionbench-quick compat

# Debian packages and Rust targets a fresh machine needs (idempotent).
deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release --workspace

# Build everything, then run the bundled example through qrun.
demo: build
	@scripts/demo.sh

lint: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p qkernel --release --target x86_64-unknown-none -- -D warnings

# fmt, clippy, unit tests and the /dev/kvm integration tests.
test: lint
	$(CARGO) test --workspace --release --no-fail-fast

bench: build
	$(CARGO) run --release -p bench

# FunctionBench (issue 19): Python, Node.js, Go and Java functions as OCI
# containers under qrun (with hibernation), runc and gVisor's runsc (with
# checkpoint/restore); builds its image and runsc once (root, network) into
# ~/.cache/qrun-functionbench. Writes docs/bench/functionbench[-quick]-DATE.{md,json,png}.
# FUNCTIONBENCH_ARGS passes more options (`--instances N`, `--only W1,W2`).
# Slow: not part of `make test`.
FUNCTIONBENCH_ARGS ?=
functionbench: build
	$(CARGO) run --release -p bench -- functionbench $(FUNCTIONBENCH_ARGS)

functionbench-quick: build
	$(CARGO) run --release -p bench -- functionbench --quick $(FUNCTIONBENCH_ARGS)

# Kubernetes' critest through containerd's CRI (qrun and runc handlers, the
# same locally built images), then the OCI runtime-tools suite, each against
# qrun and runc; prints both pass counts (target/oci-validate/,
# target/runtime-tools/). Slow; needs the Go module proxy the first time.
# SUITE=critest or SUITE=runtime-tools runs one. Not part of `make test`.
oci-validate: build
	@scripts/oci-validate.sh target/release/qrun

# CPython's regression suite (issue 18), one module at a time, natively and
# in a `qrun do` sandbox; installs libpython3.11-testsuite if missing and
# writes docs/compat/cpython-DATE.md. Slow: not part of `make test`.
# COMPAT_MODULES names the module list; TIMEOUT (s per module) and MEMORY
# are passed through.
COMPAT_MODULES ?= docs/compat/cpython-modules.txt
compat: build
	@scripts/compat-cpython.sh $(COMPAT_MODULES)

clean:
	$(CARGO) clean
