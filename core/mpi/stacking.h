// Stacking with other PMPI tools (profilers such as mpiP, Score-P, IPM,
// Darshan) preloaded or linked beside mlxa2a.
//
// The shim defines MPI_X and PMPI_X for X = Init, Init_thread, Alltoall,
// Alltoall_c, Comm_split (and MPI_Finalize; PMPI_Finalize is left to the MPI:
// mlxa2a's clean-up runs inside it, from a delete callback). The rules:
//  * MPI_X hands the call on to the next definition of MPI_X when that belongs
//    to another library (a tool loaded after mlxa2a), so the tool sees it; the
//    tool passes it to PMPI_X, which the dynamic linker resolves to ours.
//    When the next MPI_X is the MPI's own, MPI_X does PMPI_X's work itself.
//  * PMPI_X does mlxa2a's work (initialisation, the engine, team derivation)
//    and calls the MPI's own PMPI_X (mpi_own()). So the engine runs once per
//    call, inside the innermost tool, whichever order the libraries are in:
//    a tool times and counts the call the application waits for.
//  * Every call mlxa2a makes to one of these functions itself goes straight to
//    mpi_own(), never by name (the dynamic linker would find our PMPI_X).
//  * A PMPI_Alltoall entered while this thread is inside mlxa2a's alltoall
//    (ReentryGuard) goes straight to the MPI: the engine never runs twice.
//
// Thread safety: every function here may be called from any thread; the
// tables are resolved once, when the shim is loaded.
#pragma once

#include <mpi.h>

#include <string>

namespace mlxa2a::core::mpi {

// The MPI library's own PMPI entry points among those the shim defines: the
// definition after mlxa2a's in the search order (dlsym RTLD_NEXT), else the
// global one, never one of ours. Resolved when the shim is loaded (its
// constructor runs after the MPI's, which the shim links, and before the
// program's), so a call reads a plain pointer; null where the MPI lacks one
// (alltoall_c) - require_mpi_own() at MPI_Init aborts when a mandatory one is.
struct MpiOwn {
  int (*alltoall)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
  void* alltoall_c;  // int (*)(..., MPI_Count, ...) where the MPI has it
  int (*comm_split)(MPI_Comm, int, int, MPI_Comm*);
  int (*init)(int*, char***);
  int (*init_thread)(int*, char***, int, int*);
};
namespace detail {
extern MpiOwn g_mpi_own;
}
inline const MpiOwn& mpi_own() noexcept { return detail::g_mpi_own; }
// Resolves mpi_own() if not yet (idempotent, thread-safe), then aborts with a
// message when a mandatory entry is missing (the process has no MPI).
void require_mpi_own() noexcept;

// The MPI library's own definition of `name` (see MpiOwn), or null.
void* mpi_own_symbol(const char* name) noexcept;

// The next definition of the MPI function `name` after mlxa2a's when it is
// another library's (a tool loaded after mlxa2a), else null: none, or the
// MPI's own - the object that defines `name` also defines its profiling name
// `pname` (PMPI_X for MPI_X, pmpi_x_ for mpi_x_).
void* next_tool_definition(const char* name, const char* pname) noexcept;

// The file that defines the code at addr ("?" when unknown).
std::string object_of(const void* addr);

// How MPI_Alltoall reaches mlxa2a in this process, checked after MPI_Init:
// logs at info level where a tool sits in front of mlxa2a and hands calls on,
// and returns a warning (empty: none) when calls cannot reach mlxa2a at all,
// naming the library in the way and the order that works.
std::string check_stacking();

// A tool after mlxa2a handed an MPI_Alltoall to the MPI without passing through
// mlxa2a's PMPI_Alltoall: warned once per process, naming the tool.
void note_bypass(const char* entry, const void* tool_fn) noexcept;

}  // namespace mlxa2a::core::mpi
