// mlxa2a_man: prints one man page built from the switch registry (core/info/
// man.h). Run at build time by docs/man/meson.build; not installed.
//   mlxa2a_man PAGE VERSION [HELP_FILE]    PAGE: mlxa2a.7, mlxa2a_info.1, mlxa2a-tune.1, mlxa2a-run.1
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "core/config/registry.h"
#include "core/config/switches.h"
#include "core/info/man.h"

int main(int argc, char** argv) {
  using namespace mlxa2a::core;
  if (argc < 3 || argc > 4) {
    std::fputs("usage: mlxa2a_man PAGE VERSION [HELP_FILE]\n", stderr);
    return 2;
  }
  std::string help;
  if (argc == 4) {
    std::ifstream in(argv[3]);
    if (!in) {
      std::fprintf(stderr, "mlxa2a_man: cannot read %s\n", argv[3]);
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();
    help = text.str();
  }
  // Defaults only: the builder's MLXA2A_* variables must not reach the page.
  config::Registry registry(config::all_switches());
  registry.load({});
  const std::string page = info::man_page(argv[1], registry, argv[2], help);
  if (page.empty()) {
    std::fprintf(stderr, "mlxa2a_man: unknown page %s\n", argv[1]);
    return 2;
  }
  std::fputs(page.c_str(), stdout);
  return 0;
}
