#include "core/info/render.h"

#include <sys/stat.h>

#include <cstdio>

#include "core/config/parse.h"
#include "core/tune/tune_file.h"

namespace mlxa2a::core::info {

namespace {

using config::Registry;

bool shown(const Registry::Entry& e, const RenderOptions& o) {
  return e.spec->verbosity <= o.max_verbosity;
}

// Wraps text at about 76 columns, each line starting with prefix.
std::string wrap(std::string_view text, std::string_view prefix) {
  std::string out, line(prefix);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t sp = text.find(' ', pos);
    if (sp == std::string_view::npos) sp = text.size();
    const std::string_view word = text.substr(pos, sp - pos);
    if (line.size() > prefix.size() && line.size() + 1 + word.size() > 78) {
      out += line + "\n";
      line = prefix;
    }
    if (line.size() > prefix.size()) line += ' ';
    line += word;
    pos = sp + 1;
  }
  if (line.size() > prefix.size()) out += line + "\n";
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}


}  // namespace

std::string type_text(const config::Spec& s) {
  std::string t(to_string(s.type));
  if (s.type == config::Type::Enum) {
    t += " (";
    for (std::size_t i = 0; i < s.choices.size(); ++i) {
      if (i) t += '|';
      t += s.choices[i];
    }
    t += ')';
  } else if (s.type == config::Type::Int) {
    t += " [" + std::to_string(s.min) + ".." + std::to_string(s.max) + "]";
  } else if (s.type == config::Type::Size && s.size_max != config::kSizeInfinite) {
    t += " [..." + config::format_size(s.size_max) + "]";
  }
  return t;
}

std::string default_text(const config::Spec& s) {
  // Show the canonical form ("16" stays "16", "4096" becomes "4K").
  const config::ParseResult r = config::parse_value(s, s.default_text);
  return r.value ? config::format_value(s, *r.value) : std::string(s.default_text);
}

std::string render_listing(const Registry& r, const RenderOptions& o) {
  std::string out;
  for (const Registry::Entry& e : r.entries()) {
    if (!shown(e, o)) continue;
    const config::Spec& s = *e.spec;
    out += "MLXA2A_" + std::string(s.name) + "\n";
    out += "    value:   '" + e.text + "' (" + e.origin + ")\n";
    out += "    default: '" + default_text(s) + "'\n";
    out += "    type:    " + type_text(s) + "; " + std::string(to_string(s.verbosity)) +
           "; " + std::string(to_string(s.scope)) + (s.env_only ? "; environment only" : "") +
           "\n";
    out += wrap(s.description, "    ");
    out += "\n";
  }
  return out;
}

std::string render_config_file(const Registry& r, const RenderOptions& o) {
  std::string out =
      "# mlxa2a configuration (use with MLXA2A_CONFIG_FILE=<this file>).\n"
      "# Lines are MLXA2A_NAME = VALUE; the environment overrides this file.\n\n";
  for (const Registry::Entry& e : r.entries()) {
    if (!shown(e, o)) continue;
    const config::Spec& s = *e.spec;
    out += wrap(s.description, "#");
    out += "# type: " + type_text(s) + "; default: " + default_text(s) + "\n";
    if (s.env_only) {
      out += "# (environment only)\n# MLXA2A_" + std::string(s.name) + " = " + e.text + "\n\n";
    } else {
      out += "MLXA2A_" + std::string(s.name) + " = " + e.text + "\n\n";
    }
  }
  return out;
}

std::string render_json(const Registry& r, const RenderOptions& o) {
  std::string out = "[";
  bool first = true;
  for (const Registry::Entry& e : r.entries()) {
    if (!shown(e, o)) continue;
    const config::Spec& s = *e.spec;
    out += first ? "\n" : ",\n";
    first = false;
    out += "  {\"name\": " + json_string("MLXA2A_" + std::string(s.name));
    out += ", \"type\": " + json_string(to_string(s.type));
    out += ", \"default\": " + json_string(default_text(s));
    out += ", \"value\": " + json_string(e.text);
    out += ", \"source\": " + json_string(to_string(e.source));
    out += ", \"origin\": " + json_string(e.origin);
    out += ", \"verbosity\": " + json_string(to_string(s.verbosity));
    out += ", \"scope\": " + json_string(to_string(s.scope));
    if (!s.choices.empty()) {
      out += ", \"choices\": [";
      for (std::size_t i = 0; i < s.choices.size(); ++i) {
        out += (i ? ", " : "") + json_string(s.choices[i]);
      }
      out += "]";
    }
    out += ", \"description\": " + json_string(s.description) + "}";
  }
  return out + "\n]\n";
}

namespace {

// One tune file's decisions (and its stamp), under a title naming what it is.
std::string render_one_tune_file(const std::string& what, const std::string& path) {
  std::string error;
  const auto file = tune::TuneFile::load(path, &error);
  if (!file) return "\n" + what + " cannot be used (trials will run instead): " + error + "\n";
  std::string out = "\nMeasured decisions in " + what + " " + path + " (" +
                    std::to_string(file->entries().size()) + "):\n";
  if (const auto& s = file->stamp()) {
    out += "  made with build: " + s->build + "\n  made with MPI: " + s->mpi +
           "\n  made on HCA: " + s->hca + "\n  made on layout: " + s->layout.mpi + " " +
           std::to_string(s->layout.nodes) + " nodes x " + std::to_string(s->layout.ranks_per_node) +
           " (jobs on anything else ignore this file)\n";
  }
  for (const tune::FileEntry& e : file->entries()) {
    const std::uint64_t lo = std::uint64_t{1} << e.size_class;
    out += "  " + e.layout.mpi + " ranks=" + std::to_string(e.layout.ranks) +
           " nodes=" + std::to_string(e.layout.nodes) +
           " ranks_per_node=" + std::to_string(e.layout.ranks_per_node) +
           (e.layout.oversubscribed ? " oversubscribed" : "") + ": " +
           config::format_size(lo) + "-" +
           (e.size_class == 63 ? std::string("inf") : config::format_size(2 * lo)) + " -> " +
           std::string(tune::to_string(e.path)) + "\n";
  }
  return out;
}

}  // namespace

std::string render_tune_file(const config::Registry& r) {
  const std::string& path = r.get_string("TUNE_FILE");
  if (!path.empty()) return render_one_tune_file("MLXA2A_TUNE_FILE", path);
  // Else the site files a job of either family would read (MLXA2A_TUNE_SITE_DIR).
  const std::string& dir = r.get_string("TUNE_SITE_DIR");
  std::string out;
  for (const char* family : {"ompi", "mpich"}) {
    const std::string site = dir + "/tune-" + family + ".txt";
    struct stat st {};
    if (!dir.empty() && ::lstat(site.c_str(), &st) == 0) {
      out += render_one_tune_file("the site tune file", site);
    }
  }
  return out;
}

}  // namespace mlxa2a::core::info
