#!/usr/bin/env bash
# Run from the project's root, here (after ../shared/gpu/prepare.sh): puts Debian's
# Open MPI packages (what libmpi, mpirun and its components load) into .gpu/mpi/
# with a setup.sh to source on the GPU machine, which has no network. There each
# file is copied only where the machine has none (its own libraries win).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p .gpu/mpi
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64)
compgen -G '.gpu/mpi/libopenmpi3_*.deb' >/dev/null || (cd .gpu/mpi && apt-get -qq "${o[@]}" download \
  openmpi-bin openmpi-common libopenmpi3 libpmix2 libevent-core-2.1-7 \
  libevent-pthreads-2.1-7 libhwloc15 libfabric1 libibverbs1 ibverbs-providers \
  librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1 libpsm2-2 libpsm-infinipath1 \
  libucx0 libmunge2 libatomic1 2>/dev/null)
cat > .gpu/mpi/setup.sh <<'SH'
# Sourced on the GPU machine after .gpu/setup.sh: Open MPI, and what mpirun needs
# there (running as root; CMA single copy, which its container allows, run 97).
tmp=$(mktemp -d)
for f in .gpu/mpi/*.deb; do dpkg -x "$f" "$tmp"; done
cp -rn "$tmp"/. / 2>/dev/null || true
rm -rf "$tmp"
ldconfig
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=cma
SH
debs=(.gpu/mpi/*.deb)
echo "ready: .gpu/mpi holds ${#debs[@]} packages; build with \`cargo build --release -p wmx-bench --bin bench --features mpi\`, then on the 2-GPU machine: source .gpu/setup.sh; source .gpu/mpi/setup.sh; mpirun -n 2 --bind-to none target/release/bench --dist"
