#include "core/config/switches.h"

#include <type_traits>
#include <variant>

#include "core/config/node_layout.h"
#include "core/config/parse.h"
#include "core/config/switch_checks.h"

namespace mlxa2a::core::config {

namespace {

using namespace checks;  // the rows' value checks (switch_checks.h)

constexpr std::string_view kLogLevels[] = {"error", "warn", "info", "debug", "trace"};
constexpr std::string_view kCollTrace[] = {"none", "info", "debug"};
// Must match rcache::parse_invalidation (a unit test checks every choice).
constexpr std::string_view kInvalidation[] = {"auto", "ucm", "patch", "strict", "none"};
constexpr std::string_view kHugepages[] = {"auto", "hugetlb", "thp", "off"};

// A row's store: its value into its field of one of Settings' switch structs
// (integers are range-checked by the row, so the narrowing casts keep every
// value).
template <class T>
void assign(T& field, const Value& v) {
  std::visit(
      [&field](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<T> && std::is_arithmetic_v<X>) {
          field = static_cast<T>(x);
        } else if constexpr (std::is_same_v<T, X>) {
          field = x;
        }
      },
      v);
}

template <auto Part, auto Field>
void store_into(const Value& v, Settings& s) {
  assign(s.*Part.*Field, v);
}

template <auto Field>
constexpr auto net = &store_into<&Settings::net, Field>;
template <auto Field>
constexpr auto shm = &store_into<&Settings::shm, Field>;
template <auto Field>
constexpr auto rcache = &store_into<&Settings::rcache, Field>;

constexpr Spec kSwitches[] = {
    {.name = "ENABLE",
     .type = Type::Bool,
     .default_text = "y",
     .description = "Use mlxa2a's engines for MPI_Alltoall calls that qualify. When off, "
                    "every call goes to PMPI_Alltoall unchanged.",
     .scope = Scope::AllEqual},
    {.name = "LOG_LEVEL",
     .type = Type::Enum,
     .default_text = "warn",
     .description = "Messages printed by mlxa2a: error, warn, info, debug or trace.",
     .choices = kLogLevels,
     .runtime_writable = true},
    {.name = "LOG_FILE",
     .type = Type::String,
     .default_text = "",
     .description = "Write messages and call traces to this file instead of stderr. "
                    "%r is replaced by the MPI rank, %p by the process id, %h by the host.",
     .verbosity = Verbosity::Tuner},
    {.name = "COLL_TRACE",
     .type = Type::Enum,
     .default_text = "none",
     .description = "Trace collective calls: none; info, one line per MPI_Alltoall and "
                    "MPI_Comm_split (communicator, size, bytes per peer, chosen path and "
                    "why); debug, also team set-up.",
     .choices = kCollTrace,
     .runtime_writable = true},
    {.name = "COLL_STATS",
     .type = Type::String,
     .default_text = "n",
     .description = "At MPI_Finalize, print how many MPI_Alltoall calls of the finalizing "
                    "thread each path served (pmpi, shm). Counting is always on and does not "
                    "change any decision; the tests compare it with the trace. Also the RDMA "
                    "and zero-copy counters, the CPU time spent waiting inside mlxa2a "
                    "(stats waits:) and the hierarchical engine's wall time per step with the "
                    "PMPI leaders' sends (stats phases:, docs/hier.md); waits and steps are "
                    "timed only with this switch. json[:PATH]: the same lines, and rank 0 "
                    "writes one job-wide JSON report to PATH (default mlxa2a-stats.json; "
                    "docs/stats.md); wanted on any rank, it is made by all.",
     .verbosity = Verbosity::Tuner,
     .check = check_coll_stats},
    {.name = "TUNE",
     .type = Type::Tune,
     .default_text = "0-inf:auto",
     .description = "Which path serves which bytes per peer: '#'-separated RANGE:PATH rules, "
                    "RANGE = LO-HI (half-open, K/M/G suffixes, HI may be inf), PATH = auto, "
                    "shm, rdma or pmpi; later rules win. Example: 0-4K:shm#4K-inf:pmpi.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual},
    {.name = "TUNE_SAMPLES",
     .type = Type::Int,
     .default_text = "3",
     .description = "auto: the most timed calls per candidate path and size class before the "
                    "ranks decide (median, max over ranks; PMPI kept unless beaten by 5%); 4 "
                    "times as many (at most 64) below 8 KiB per peer, where calls are cheap; "
                    "fewer when one path is clearly ahead or a neighbouring class is decided. "
                    "0 = no measurement: fixed size rules decide.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = 0,
     .max = 64},
    {.name = "TUNE_FILE",
     .type = Type::String,
     .default_text = "",
     .description = "auto: read measured decisions from this file at start (their size "
                    "classes skip the trials) and write all decisions back at MPI_Finalize "
                    "(rank 0) when they changed. Only a regular file (at most 1 MiB) that "
                    "parses as a tune file, or no file, is used or replaced; never a "
                    "symbolic link or device. Explicit MLXA2A_TUNE rules still win. "
                    "mlxa2a_info shows it.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual},
    {.name = "TUNE_SITE_DIR",
     .type = Type::String,
     .default_text = MLXA2A_SITE_TUNE_DIR,
     .description = "auto: where the site tune file made by mlxa2a-tune is "
                    "(tune-ompi.txt, tune-mpich.txt). Read at start when MLXA2A_TUNE_FILE is "
                    "unset; never written by a job. Ignored, with one warning, when made with "
                    "another build, MPI, HCA firmware or layout. Empty: no site file.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual},
    {.name = "TUNE_STAMP",
     .type = Type::Bool,
     .default_text = "n",
     .description = "auto: MLXA2A_TUNE_FILE is written with what it was made on (build, MPI, "
                    "HCA firmware, MPI_COMM_WORLD's layout); a job on anything else then "
                    "ignores it. mlxa2a-tune sets it; a file that has it keeps it.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual},
    {.name = "NET_DEVICES",
     .type = Type::Devices,
     .default_text = "all",
     .description = "RDMA devices and ports the inter-node engine may use: all (each leader "
                    "takes the ACTIVE port nearest its cores by hwloc NUMA locality; leaders "
                    "of a node on one NUMA node spread over its HCAs), or a list such as "
                    "mlx5_0:1,mlx5_1:1, tried in that order.",
     .scope = Scope::AllEqual,
     .store = net<&NetSwitches::devices>},
    {.name = "NET_ZCOPY_THRESHOLD",
     .type = Type::Size,
     .default_text = "0",
     .description = "Multi-node teams whose leaders use RDMA: bytes per peer from which the "
                    "fixed rules let the leaders' writes read the ranks' send buffers "
                    "directly (zero-copy through the node's shared PD and each rank's "
                    "registration cache, docs/zerocopy.md) instead of staging them; tuning "
                    "measures it as path zcopy. 0 = never (no shared PD is set up): the "
                    "default, because on fakeverbs no size saves the ranks CPU on every layout "
                    "(bench/results/zerocopy.md); measure on a ConnectX before setting it.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .store = net<&NetSwitches::zcopy_threshold>},
    {.name = "NET_PIPELINE",
     .type = Type::Bool,
     .default_text = "y",
     .description = "Multi-node teams: overlap the rounds of a call larger than one staging "
                    "round - every rank stages round r+1 while its leaders' round-r exchange "
                    "is in flight (docs/hier.md, 'Pipelined rounds'). n = one round after the "
                    "other. A protocol choice, so all-equal.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .store = net<&NetSwitches::pipeline>},
    {.name = "NET_PMPI_PIECE",
     .type = Type::Size,
     .default_text = "60K",
     .description = "Multi-node teams whose leaders use PMPI: data bytes per MPI message at "
                    "most; a leader's message to another node is cut into pieces of this "
                    "size, all in flight at once, so that each stays below the MPI's eager "
                    "limit (Open MPI over TCP: 64K) instead of paying a rendezvous round "
                    "trip (docs/hier-transports.md, 'Pieces below the eager limit'). At least "
                    "64, at most 1G. A protocol choice, so all-equal.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .size_max = std::uint64_t{1} << 30,
     .check = check_piece,
     .store = net<&NetSwitches::pmpi_piece>},
    {.name = "NET_PMPI_SLOT_SIZE",
     .type = Type::Size,
     .default_text = "512K",
     .description = "Multi-node teams whose leaders use PMPI: staging bytes per rank and round "
                    "(a call stages up to this many bytes per rank at once; larger calls run "
                    "in rounds). Fewer rounds mean fewer network round trips; the node's "
                    "staging segment is 4 x its ranks x this (512K: 2 MiB per rank). RDMA "
                    "leaders, which pin their stage, use MLXA2A_SHM_SLOT_SIZE. When only "
                    "MLXA2A_SHM_SLOT_SIZE is set, it applies here too (docs/hier-transports.md). "
                    "The largest value of the team wins. At most 1G.",
     .verbosity = Verbosity::Tuner,
     .size_max = kSlotSizeMax,
     .check = check_slot_size,
     .follows = "SHM_SLOT_SIZE",
     .store = net<&NetSwitches::pmpi_slot_size>},
    {.name = "NET_PMPI_STAGE_LIMIT",
     .type = Type::Size,
     .default_text = "64M",
     .description = "Multi-node teams whose leaders use PMPI: the most bytes of /dev/shm a "
                    "node's staging segment may take per communicator (4 x the node's ranks x "
                    "the slot). Where MLXA2A_NET_PMPI_SLOT_SIZE (explicit or not) would take "
                    "more on the team's largest node, the slot is halved until it fits, but "
                    "not below MLXA2A_SHM_SLOT_SIZE (64M: 512K up to 32 ranks per node, 128K "
                    "at 128). 0: no limit. The largest value of the team wins, 0 above all.",
     .verbosity = Verbosity::Tuner,
     .store = net<&NetSwitches::pmpi_stage_limit>},
    {.name = "NET_GID_INDEX",
     .type = Type::Int,
     .default_text = "-1",
     .description = "RoCE ports: the GID table index to address this port by; -1 = the RoCE "
                    "v2 entry (IPv4-mapped, else IPv6) on a subnet every leader shares.",
     .verbosity = Verbosity::Tuner,
     .min = -1,
     .max = 255,
     .store = net<&NetSwitches::gid_index>},
    {.name = "NET_TIMEOUT",
     .type = Type::Int,
     .default_text = "120000",
     .description = "Milliseconds a set-up hand-over (zero-copy's shared PD) or the "
                    "agreement after a failure RDMA could not recover from may take. A node "
                    "leader waits for another node's data without a limit (a late rank is "
                    "normal); MLXA2A_NET_KEEPALIVE finds a dead one.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = 1,
     .max = 86400000,
     .store = net<&NetSwitches::timeout_ms>},
    {.name = "NET_KEEPALIVE",
     .type = Type::Int,
     .default_text = "2000",
     .description = "Milliseconds between zero-length RDMA writes a node leader sends to each "
                    "partner leader whose data it still awaits: a dead partner's queue pair "
                    "fails within its retry budget and its data then comes through PMPI "
                    "(or the job ends as the MPI ends it). A late partner is never an error.",
     .verbosity = Verbosity::Tuner,
     .min = 1,
     .max = 86400000,
     .store = net<&NetSwitches::keepalive_ms>},
    {.name = "NET_QP_TIMEOUT",
     .type = Type::Int,
     .default_text = "18",
     .description = "RDMA queue pairs: local ACK timeout exponent, 4.096 us * 2^N per retry "
                    "(18: 1.07 s, x 8 tries with the default retry count = 8.6 s before a "
                    "write fails: rides out an SM reroute or link flap). 0 (wait forever) "
                    "is not allowed.",
     .verbosity = Verbosity::Tuner,
     .min = 1,
     .max = 31,
     .store = net<&NetSwitches::qp_timeout>},
    {.name = "NET_RETRY_COUNT",
     .type = Type::Int,
     .default_text = "7",
     .description = "RDMA queue pairs: transport retries before a write fails.",
     .verbosity = Verbosity::Tuner,
     .min = 0,
     .max = 7,
     .store = net<&NetSwitches::retry_count>},
    {.name = "NET_RC_QP_BUDGET",
     .type = Type::Int,
     .default_text = "0",
     .description = "RDMA: the most RC queue pairs (one per partner process, "
                    "MLXA2A_NET_STRIPES with stripes) a process may "
                    "hold. A team whose leaders would need more does not use RC (every "
                    "leader agrees) and its leaders use DC (one DCT and a few DCIs each; the "
                    "team line says transport=dc), or PMPI where DC is unavailable (the "
                    "team line says why). 0 = the HCA's max_qp / (2 x ranks on the node): "
                    "half of the HCA's QPs left to the MPI library and others, the rest "
                    "shared by the node's processes.",
     .verbosity = Verbosity::Tuner,
     .min = 0,
     .max = 16777215,
     .store = net<&NetSwitches::rc_qp_budget>},
    {.name = "NET_INLINE",
     .type = Type::Int,
     .default_text = "256",
     .description = "RDMA queue pairs: inline bytes asked for at creation (halved until the "
                    "device accepts); writes up to what the queue pair then reports "
                    "(ibv_create_qp's max_inline_data, which mlx5 rounds up to its WQE size) "
                    "carry their data in the work request. 0 = never inline. Changes no result.",
     .verbosity = Verbosity::Tuner,
     .min = 0,
     .max = 4096,
     .store = net<&NetSwitches::inline_ask>},
    {.name = "NET_RELAXED_ORDERING",
     .type = Type::Bool,
     .default_text = "y",
     .description = "Register the leaders' out-areas with IBV_ACCESS_RELAXED_ORDERING (PCIe "
                    "writes into them may be reordered; safe: readers wait for the write's "
                    "immediate, which is ordered after its data). A device or stack that "
                    "refuses the flag gets the registration without it. Changes no result.",
     .verbosity = Verbosity::Tuner,
     .store = net<&NetSwitches::relaxed_ordering>},
    {.name = "NET_STRIPES",
     .type = Type::Int,
     .default_text = "1",
     .description = "RDMA (RC): queue pairs per pair of leaders; a message of at least "
                    "MLXA2A_NET_STRIPE_MIN bytes is cut into this many stripes, each written on "
                    "its own QP, which on RoCE carries its own flow label (a path of its own "
                    "through ECMP). 1 = one QP per pair: InfiniBand routes by LID, where more "
                    "QPs only cost QPs; try 2-4 on a RoCE fabric with ECMP. Multiplies the RC "
                    "QPs counted against MLXA2A_NET_RC_QP_BUDGET. Changes no result.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = 1,
     .max = 8,
     .store = net<&NetSwitches::stripes>},
    {.name = "NET_STRIPE_MIN",
     .type = Type::Size,
     .default_text = "256K",
     .description = "RDMA (RC) with MLXA2A_NET_STRIPES above 1: the smallest message to a "
                    "partner leader that is cut into stripes; smaller ones take one QP. "
                    "Changes no result.",
     .verbosity = Verbosity::Tuner,
     .store = net<&NetSwitches::stripe_min>},
    {.name = "NET_HUGEPAGES",
     .type = Type::Enum,
     .default_text = "auto",
     .description = "Pages of a multi-node team's staging segment (what RDMA leaders "
                    "register): hugetlb (memfd with MFD_HUGETLB, shared through /proc/PID/fd), "
                    "thp (normal shared memory with MADV_HUGEPAGE), off (4 KiB pages), auto "
                    "(hugetlb when enough default-size huge pages are free, else thp when the "
                    "kernel's shmem THP setting allows it, else off). What a node got is in "
                    "the debug team line and the stats report. Node rank 0's value wins.",
     .verbosity = Verbosity::Tuner,
     .choices = kHugepages,
     .store = net<&NetSwitches::hugepages>},
    {.name = "NET_TRAFFIC_CLASS",
     .type = Type::Int,
     .default_text = "-1",
     .description = "RoCE: the traffic class byte (DSCP << 2 | ECN) of the leaders' RDMA "
                    "packets, so a PFC/ECN fabric puts them in its lossless class; -1 = "
                    "UCX's default, 106 (DSCP 26) on RoCE, 0 on InfiniBand. Set it to what "
                    "the site sets UCX_IB_TRAFFIC_CLASS to.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = -1,
     .max = 255,
     .store = net<&NetSwitches::traffic_class>},
    {.name = "NET_SL",
     .type = Type::Int,
     .default_text = "0",
     .description = "The service level of the leaders' queue pairs (InfiniBand: SL to VL "
                    "mapping; RoCE: the priority), as UCX_IB_SL.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = 0,
     .max = 15,
     .store = net<&NetSwitches::service_level>},
    {.name = "NET_PKEY",
     .type = Type::Int,
     .default_text = "-1",
     .description = "InfiniBand: the partition key (by value, e.g. 0x8001; the low 15 bits "
                    "are matched) looked up in the port's P_Key table; a port without it, "
                    "or with only limited membership, is not used. -1 = the first "
                    "full-member entry (UCX_IB_PKEY=auto). RoCE ports use their one entry.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = -1,
     .max = 0xffff,
     .store = net<&NetSwitches::pkey>},
    {.name = "NET_VERBS_LIBRARY",
     .type = Type::String,
     .default_text = "libibverbs.so.1",
     .description = "The verbs library to dlopen for the inter-node engine (a path, or a name "
                    "the loader searches). For tests: a software provider such as fakeverbs.",
     .verbosity = Verbosity::Developer,
     .check = check_nonempty,
     .store = net<&NetSwitches::verbs_library>},
    {.name = "RCACHE_ALIGN",
     .type = Type::Size,
     .default_text = "16",
     .description = "Registration cache alignment: requests are rounded out to this power "
                    "of two (16 bytes to the page size), never past the buffer's mapping.",
     .verbosity = Verbosity::Tuner,
     .check = check_align,
     .store = rcache<&RcacheSwitches::align>},
    {.name = "RCACHE_MAX_REGIONS",
     .type = Type::Int,
     .default_text = "65536",
     .description = "Registration cache: most regions kept registered; unused ones are "
                    "evicted oldest first (CLOCK), never one that is in use.",
     .verbosity = Verbosity::Tuner,
     .min = 1,
     .max = 1 << 20,
     .store = rcache<&RcacheSwitches::max_regions>},
    {.name = "RCACHE_MAX_BYTES",
     .type = Type::Size,
     .default_text = "64G",
     .description = "Registration cache: most bytes kept registered (inf: no limit); "
                    "also capped at half of RLIMIT_MEMLOCK.",
     .verbosity = Verbosity::Tuner,
     .check = check_nonzero_size,
     .store = rcache<&RcacheSwitches::max_bytes>},
    {.name = "RCACHE_INVALIDATION",
     .type = Type::Enum,
     .default_text = "auto",
     .description = "How cached registrations learn that memory was unmapped or remapped: "
                    "auto (UCX's hooks when libucm is loaded, else patch), ucm (UCX's libucm "
                    "memory events), patch (mlxa2a patches libc's mmap/munmap/mremap/madvise/"
                    "shmdt/brk, which also sees free() and realloc()), strict (also "
                    "userfaultfd events, which see raw system calls; slower) or none (only "
                    "for programs that never unmap communication buffers).",
     .verbosity = Verbosity::Tuner,
     .choices = kInvalidation,
     .store = rcache<&RcacheSwitches::invalidation>},
    {.name = "SHM_CMA_THRESHOLD",
     .type = Type::Size,
     .default_text = "64K",
     .description = "Shared-memory alltoall: bytes per peer from which each rank reads its "
                    "blocks straight from its peers' send buffers (process_vm_readv, one "
                    "copy) instead of copying through the shared segment (two copies); 0 = "
                    "never. Used when ranks do not outnumber cores; node rank 0's value wins.",
     .verbosity = Verbosity::Tuner,
     .store = shm<&ShmSwitches::cma_threshold>},
    {.name = "SHM_CMA_THRESHOLD_OVERSUBSCRIBED",
     .type = Type::Size,
     .default_text = "0",
     .description = "The same threshold when a node's ranks outnumber its cores (0 = never, "
                    "the default): each read then competes for a core with the peer it reads "
                    "from, and copying through a large slot measured faster.",
     .verbosity = Verbosity::Tuner,
     .store = shm<&ShmSwitches::cma_threshold_oversubscribed>},
    {.name = "SHM_SLOT_SIZE",
     .type = Type::Size,
     .default_text = "128K",
     .description = "Shared-memory alltoall: bytes of each rank's staging slot (two per "
                    "rank); larger calls are pipelined through it. Node rank 0's value wins. "
                    "Multi-node (hierarchical) teams whose leaders use RDMA stage up to this "
                    "many bytes per rank and round (PMPI leaders: MLXA2A_NET_PMPI_SLOT_SIZE, "
                    "unless only this one is set); there the largest value of the team wins. "
                    "At most 1G.",
     .verbosity = Verbosity::Tuner,
     .size_max = kSlotSizeMax,
     .check = check_slot_size,
     .store = shm<&ShmSwitches::slot_size>},
    {.name = "SHM_SLOT_SIZE_OVERSUBSCRIBED",
     .type = Type::Size,
     .default_text = "512K",
     .description = "The staging slot when a node's ranks outnumber its cores (single-node "
                    "teams): each pipelined round then costs context switches, so fewer, "
                    "larger rounds win. Node rank 0's value wins. At most 1G.",
     .verbosity = Verbosity::Tuner,
     .size_max = kSlotSizeMax,
     .check = check_slot_size,
     .store = shm<&ShmSwitches::slot_size_oversubscribed>},
    {.name = "SHM_POOL",
     .type = Type::Int,
     .default_text = "2",
     .description = "Engines of freed communicators kept per process and reused by a later "
                    "communicator of the same ranks in the same order (MPI_Comm_dup/split "
                    "churn then builds no engine): single-node teams' shared-memory segments, "
                    "multi-node teams' staging segment, leaders' communicator and transport. "
                    "Each keeps its segment mapped (2 x ranks x slot size). 0 = none, at most "
                    "64.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .min = 0,
     .max = 64,
     .store = shm<&ShmSwitches::pool>},
    {.name = "LEADERS",
     .type = Type::String,
     .default_text = "rails",
     .description = "Hierarchical alltoall (multi-node communicators): leaders per node, "
                    "which relay the node's blocks and split the remote nodes between them. "
                    "rails = one per ACTIVE HCA port (rail) of the node, bounded by its ranks, "
                    "each on its rail's port and paired with the other nodes' leaders of the "
                    "same rail (one rail, or MLXA2A_NET_DEVICES set: one leader); node = one; "
                    "numa / socket = one per NUMA domain / package holding ranks (needs bound "
                    "ranks, else one); N = N per node, spread over its ranks.",
     .verbosity = Verbosity::Tuner,
     .scope = Scope::AllEqual,
     .check = check_leaders},
    {.name = "DEBUG_NODE_SIZE",
     .type = Type::String,
     .default_text = "0",
     .description = "For tests only: pretend the ranks of one host sit on several nodes. "
                    "0 = real nodes; N = blocks of N MPI_COMM_WORLD ranks; rr:N = N ranks "
                    "per node placed round robin; A,B,C = blocks of A, B, C ranks, repeated. "
                    "Virtual nodes are never larger than real ones, so this only slows jobs "
                    "down.",
     .verbosity = Verbosity::Developer,
     .scope = Scope::AllEqual,
     .check = check_node_layout},
    {.name = "DEBUG_CARD_FORMAT",
     .type = Type::Int,
     .default_text = "0",
     .description = "For tests only: the RDMA set-up card format this process claims "
                    "(0 = this build's). Leaders of other formats refuse RDMA for the team, "
                    "naming both builds.",
     .verbosity = Verbosity::Developer,
     .min = 0,
     .max = 65535,
     .store = net<&NetSwitches::debug_card_format>},
    {.name = "DEBUG_TUNE_TIMES",
     .type = Type::String,
     .default_text = "",
     .description = "For tests only: made-up durations of trial calls, in microseconds, per "
                    "path and optionally per MPI_COMM_WORLD rank, e.g. pmpi=5,copy=2;1:copy=50 "
                    "(rank 1 sees copy take 50 us). Paths not named are timed for real.",
     .verbosity = Verbosity::Developer,
     .scope = Scope::AllEqual,
     .check = check_fake_clock},
    {.name = "CONFIG_FILE",
     .type = Type::String,
     .default_text = "",
     .description = "Read switches from this file (lines MLXA2A_NAME = VALUE, # comments); "
                    "the environment overrides it. `mlxa2a_info -c` writes one.",
     .env_only = true},
    {.name = "LIBDIR",
     .type = Type::String,
     .default_text = "",
     .description = "Where mlxa2a-run looks for the shim libraries first.",
     .verbosity = Verbosity::Developer,
     .env_only = true},
};

}  // namespace

std::span<const Spec> all_switches() { return kSwitches; }

log::Level log_level_of(const Registry& r) {
  const std::string& level = r.get_string("LOG_LEVEL");
  for (std::size_t i = 0; i < std::size(kLogLevels); ++i) {
    if (level == kLogLevels[i]) return static_cast<log::Level>(i);
  }
  return log::Level::Warn;
}

CollTrace coll_trace_of(const Registry& r) {
  const std::string& trace = r.get_string("COLL_TRACE");
  for (std::size_t i = 0; i < std::size(kCollTrace); ++i) {
    if (trace == kCollTrace[i]) return static_cast<CollTrace>(i);
  }
  return CollTrace::None;
}

Settings settings_from(const Registry& r) {
  Settings s;
  for (const Registry::Entry& e : r.entries()) {
    if (e.spec->store != nullptr) e.spec->store(e.value, s);
  }
  s.enable = r.get_bool("ENABLE");
  s.log_level = log_level_of(r);
  s.log_file = r.get_string("LOG_FILE");
  s.coll_trace = coll_trace_of(r);
  {
    const std::string stats = r.get_string("COLL_STATS");
    s.coll_stats_json = stats.rfind("json", 0) == 0;
    s.coll_stats = s.coll_stats_json || parse_bool(stats).value_or(false);
    s.coll_stats_path = stats.size() > 5 ? stats.substr(5) : "mlxa2a-stats.json";
  }
  s.tune = r.get_tune("TUNE");
  s.tune_samples = static_cast<unsigned>(r.get_int("TUNE_SAMPLES"));
  s.tune_file = r.get_string("TUNE_FILE");
  s.tune_site_dir = r.get_string("TUNE_SITE_DIR");
  s.tune_stamp = r.get_bool("TUNE_STAMP");
  s.debug_tune_times = r.get_string("DEBUG_TUNE_TIMES");
  s.leaders = LeaderPolicy::parse(r.get_string("LEADERS")).value_or(LeaderPolicy{});
  s.node_layout = NodeLayout::parse(r.get_string("DEBUG_NODE_SIZE")).value_or(NodeLayout{});
  return s;
}

}  // namespace mlxa2a::core::config
