// mlxa2a_info: lists every MLXA2A_* switch with its type, default, current value
// (from the environment and MLXA2A_CONFIG_FILE) and description. Needs no MPI.
#include <cstdio>
#include <cstring>
#include <string>

#include "core/config/registry.h"
#include "core/config/switches.h"
#include "core/info/build.h"
#include "core/info/render.h"

namespace {

constexpr const char* kUsage =
    "usage: mlxa2a_info [-a] [-c | --json] [-V] [-h]\n"
    "  (no option)  list the user and tuner switches with current values\n"
    "  -a, --all    include developer switches\n"
    "  -c, --config print a commented config file (valid MLXA2A_CONFIG_FILE input),\n"
    "               headed by the version and which shims exist and where\n"
    "  --json       print the switches as JSON\n"
    "  -V, --version  version, build configuration, and the shims found\n"
    "  -h, --help   this text\n"
    "Warnings about invalid or unknown MLXA2A_* variables go to stderr.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace mlxa2a::core;
  info::RenderOptions opts;
  enum class Mode { Listing, ConfigFile, Json } mode = Mode::Listing;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-a" || a == "--all") {
      opts.max_verbosity = config::Verbosity::Developer;
    } else if (a == "-c" || a == "--config") {
      mode = Mode::ConfigFile;
    } else if (a == "--json") {
      mode = Mode::Json;
    } else if (a == "-ca" || a == "-ac") {
      mode = Mode::ConfigFile;
      opts.max_verbosity = config::Verbosity::Developer;
    } else if (a == "-V" || a == "--version") {
      std::fputs(info::render_version(info::own_directory()).c_str(), stdout);
      return 0;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "mlxa2a_info: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  config::Registry registry(config::all_switches());
  registry.load(config::process_environment());
  for (const std::string& w : registry.warnings()) {
    std::fprintf(stderr, "mlxa2a_info: warning: %s\n", w.c_str());
  }
  std::string text;
  switch (mode) {
    case Mode::Listing:
      text = info::render_listing(registry, opts) + info::render_tune_file(registry);
      break;
    case Mode::ConfigFile:
      text = info::render_build_comment(info::own_directory()) +
             info::render_config_file(registry, opts);
      break;
    case Mode::Json: text = info::render_json(registry, opts); break;
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}
