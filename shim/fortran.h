// Shared pieces of the Fortran entry points (see fortran_init.cc and
// fortran_alltoall_ompi.cc). Fortran passes every argument by reference.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#define MLXA2A_EXPORT extern "C" __attribute__((visibility("default")))

namespace mlxa2a::shim {

// The MPI library's own definition of a Fortran symbol we interpose: for calls
// we only observe, and for every call when loaded under the other MPI family.
template <typename Fn>
Fn next_symbol(const char* name) {
  void* sym = dlsym(RTLD_NEXT, name);
  if (!sym) {
    std::fprintf(stderr, "[mlxa2a] error: %s is not defined by this process's MPI\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(sym);
}

}  // namespace mlxa2a::shim
