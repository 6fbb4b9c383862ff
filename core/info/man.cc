#include "core/info/man.h"

#include "core/info/render.h"

namespace mlxa2a::core::info {

namespace {

// Escaped text that ends its line.
std::string line(std::string_view text) {
  std::string out = roff_escape(text);
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

std::string header(std::string_view title, std::string_view section,
                   std::string_view version, std::string_view summary) {
  std::string out = ".TH " + std::string(title) + " " + std::string(section) +
                    " \"\" \"mlxa2a " + std::string(version) + "\" \"mlxa2a\"\n";
  out += ".SH NAME\n" + roff_escape(title) + " \\- " + line(summary);
  return out;
}

// A --help text, verbatim (no filling), as a man section.
std::string verbatim(std::string_view section, std::string_view text) {
  return ".SH " + std::string(section) + "\n.nf\n" + line(text) + ".fi\n";
}

std::string page7(const config::Registry& r, std::string_view version) {
  std::string out = header("mlxa2a", "7", version,
                           "a faster MPI_Alltoall for ConnectX clusters, preloaded under "
                           "the MPI you already have");
  out +=
      ".SH SYNOPSIS\n"
      ".B mlxa2a-run\n.I launcher\n.RI [ args ]\n.I app\n.br\n"
      ".B LD_PRELOAD=\n.IB libdir /libmlxa2a-ompi.so\n.RB | libmlxa2a-mpich.so\n.I app\n"
      ".SH DESCRIPTION\n"
      "mlxa2a is a PMPI interposition library. Preloaded under an unmodified MPI program, it\n"
      "serves the MPI_Alltoall calls it can serve faster (ranks of a node aggregate over shared\n"
      "memory, node leaders exchange one block per remote node by RDMA) and hands every\n"
      "other call to the MPI. There is one shim per MPI family (Open MPI, MPICH);\n"
      ".BR mlxa2a-run (1)\n"
      "picks the right one.\n"
      ".SH ENVIRONMENT\n"
      "Every switch mlxa2a reads, with its type, default and scope. Values come from the\n"
      "environment, else from the file named by MLXA2A_CONFIG_FILE, else the default.\n"
      "Switches marked all-equal must have the same value on every rank (compared at\n"
      "MPI_Init; a mismatch makes mlxa2a stand aside on every rank).\n"
      ".BR mlxa2a_info (1)\n"
      "shows the current values.\n";
  out += man_switch_list(r);
  out +=
      ".SH FILES\n"
      ".TP\n.IR MLXA2A_TUNE_SITE_DIR /tune\\-ompi.txt,\\ tune\\-mpich.txt\n"
      "The site tune file of each MPI family, made by\n.BR mlxa2a\\-tune (1)\n"
      "and read by every job when MLXA2A_TUNE_FILE is unset: its size classes run no\n"
      "trials. A file made with another build, MPI, HCA firmware or layout is ignored,\n"
      "with one warning.\n"
      ".SH SEE ALSO\n.BR mlxa2a-run (1),\n.BR mlxa2a_info (1),\n.BR mlxa2a-tune (1),\n"
      "README.md and docs/ in the mlxa2a sources\n";
  return out;
}

std::string page1(std::string_view name, std::string_view version, std::string_view help,
                  std::string_view summary, std::string_view extra) {
  std::string out = header(name, "1", version, summary);
  out += verbatim("SYNOPSIS AND OPTIONS", help);
  out += std::string(extra);
  out += ".SH SEE ALSO\n.BR mlxa2a (7)";
  out += name == "mlxa2a-run" ? ",\n.BR mlxa2a_info (1)\n" : ",\n.BR mlxa2a-run (1)\n";
  return out;
}

}  // namespace

std::string roff_escape(std::string_view text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string man_switch_list(const config::Registry& r) {
  std::string out;
  for (const config::Registry::Entry& e : r.entries()) {
    const config::Spec& s = *e.spec;
    out += ".TP\n.B MLXA2A_" + line(s.name);
    out += ".IR \"" + roff_escape(type_text(s)) + "\" ,\n";
    out += "default \\(aq" + roff_escape(default_text(s)) + "\\(aq; " +
           std::string(to_string(s.scope)) + "; " + std::string(to_string(s.verbosity)) +
           (s.env_only ? "; environment only" : "") + "\n.br\n" + line(s.description);
  }
  return out;
}

std::string man_page(std::string_view name, const config::Registry& r,
                     std::string_view version, std::string_view help_text) {
  if (name == "mlxa2a.7") return page7(r, version);
  if (name == "mlxa2a_info.1") {
    return page1("mlxa2a_info", version, help_text,
                 "list mlxa2a's switches, their values and where each came from",
                 ".SH ENVIRONMENT\nThe switches it lists are described in\n.BR mlxa2a (7).\n");
  }
  if (name == "mlxa2a-tune.1") {
    return page1("mlxa2a-tune", version, help_text,
                 "make the site tune file: measure mlxa2a's paths on the site's nodes once",
                 ".SH ENVIRONMENT\n.B MLXA2A_TUNE_FILE\nwhere to write, for one family, "
                 "when --out is not given; every other switch is described in\n"
                 ".BR mlxa2a (7).\n");
  }
  if (name == "mlxa2a-run.1") {
    return page1("mlxa2a-run", version, help_text,
                 "run an MPI program with the mlxa2a shim of its MPI preloaded",
                 ".SH ENVIRONMENT\n.B MLXA2A_LIBDIR\nwhere to look for the shims first;\n"
                 "every other switch is described in\n.BR mlxa2a (7).\n");
  }
  return {};
}

}  // namespace mlxa2a::core::info
