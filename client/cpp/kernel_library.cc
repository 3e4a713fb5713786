#include "client/cpp/kernel_library.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

extern char** environ;

namespace looptool::client {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The CPU features GCC's __builtin_cpu_supports knows (of those x86 kernels may need). A feature
// outside this list is reported missing on every CPU: the check cannot ask for it.
const std::set<std::string>& KnownFeatures() {
  static const auto* const known = new std::set<std::string>{
      "sse",     "sse2",     "sse3",     "ssse3",    "sse4.1",   "sse4.2",  "avx",
      "avx2",    "fma",      "avx512f",  "avx512vl", "avx512bw", "avx512dq", "avx512cd"};
  return *known;
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool IsCKeyword(const std::string& s) {
  static const auto* const keywords = new std::set<std::string>{
      "auto",   "break",    "case",     "char",   "const",    "continue", "default",  "do",
      "double", "else",     "enum",     "extern", "float",    "for",      "goto",     "if",
      "inline", "int",      "long",     "register", "restrict", "return", "short",    "signed",
      "sizeof", "static",   "struct",   "switch", "typedef",  "union",    "unsigned", "void",
      "volatile", "while",  "tensors"};
  return keywords->count(s) > 0;
}

struct AbiTensor {
  int id = 0;
  std::string name;  // as the program names it
  std::string param;  // the C parameter: the name, or t<id> when it is not usable in C
  std::vector<int64_t> shape;
  bool output = false;
  bool streamed = false;  // written with non-temporal stores when 64-byte aligned
};

// The facts of one kernel's `kernel_abi` observation.
struct Abi {
  std::string isa;
  std::vector<std::string> cpu_features;
  std::string program;
  int64_t flops = 0;
  int64_t alignment_bytes = 4;
  std::vector<AbiTensor> tensors;  // by id
};

absl::StatusOr<Abi> ParseAbi(const ExportedKernel& k) {
  const json j = json::parse(k.abi_json, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", k.name, ": its kernel_abi is not a kernel ABI (", why, ")"));
  };
  if (!j.is_object()) return bad("not a JSON object");
  Abi abi;
  try {
    abi.isa = j.at("isa").get<std::string>();
    abi.cpu_features = j.at("cpu_features").get<std::vector<std::string>>();
    abi.program = j.at("program").get<std::string>();
    abi.flops = j.at("flops").get<int64_t>();
    abi.alignment_bytes = j.at("alignment_bytes").get<int64_t>();
    for (const json& t : j.at("tensors")) {
      AbiTensor a;
      a.id = t.at("id").get<int>();
      a.name = t.at("name").get<std::string>();
      a.shape = t.at("shape").get<std::vector<int64_t>>();
      const std::string role = t.at("role").get<std::string>();
      if (role != "input" && role != "output") return bad("a tensor's role is " + role);
      a.output = role == "output";
      if (a.id != static_cast<int>(abi.tensors.size())) return bad("tensors out of id order");
      a.param = IsIdentifier(a.name) && !IsCKeyword(a.name) ? a.name : absl::StrCat("t", a.id);
      abi.tensors.push_back(std::move(a));
    }
    if (j.contains("streamed_outputs")) {
      for (const int id : j.at("streamed_outputs").get<std::vector<int>>()) {
        if (id < 0 || id >= static_cast<int>(abi.tensors.size()) || !abi.tensors[id].output) {
          return bad(absl::StrCat("streamed output ", id, " is no output"));
        }
        abi.tensors[id].streamed = true;
      }
    }
  } catch (const json::exception& e) {
    return bad(e.what());
  }
  if (abi.tensors.empty()) return bad("no tensors");
  return abi;
}

std::string Dims(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) absl::StrAppend(&out, "[", d, "]");
  return out;
}

std::string Date(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

// The program's text as C comment lines ("   C[m, n] += ...").
std::string CommentLines(const std::string& text, const std::string& indent) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, indent, absl::StrReplaceAll(line, {{"*/", "* /"}}), "\n");
  }
  return out;
}

std::string Parameters(const Abi& abi) {
  std::vector<std::string> params;
  for (const AbiTensor& t : abi.tensors) {
    params.push_back(absl::StrCat(t.output ? "float* " : "const float* ", t.param));
  }
  return absl::StrJoin(params, ", ");
}

// Every feature any kernel needs, in a fixed order; bit i of a mask is features[i].
std::vector<std::string> AllFeatures(const std::vector<Abi>& abis) {
  std::set<std::string> all;
  for (const Abi& a : abis) all.insert(a.cpu_features.begin(), a.cpu_features.end());
  return {all.begin(), all.end()};
}

std::string Header(const std::vector<ExportedKernel>& kernels, const std::vector<Abi>& abis,
                   const LibraryOptions& options, int64_t now) {
  const std::string guard = absl::AsciiStrToUpper(absl::StrCat("LOOPTOOL_", options.name, "_H_"));
  std::string h = absl::StrCat(
      "/* ", options.name, ".h: kernels tuned by LoopTool, exported by `looptool export` on ",
      Date(now), ".\n",
      " * Link with -l", options.name, " (lib", options.name, ".so or lib", options.name,
      ".a); ", options.name, ".json describes each kernel.\n"
      " *\n"
      " * Every kernel:\n"
      " *  - takes one pointer per tensor, in the order below: dense row-major float32 arrays of\n"
      " *    exactly the shapes given (no padding, no strides), aligned to 4 bytes at least\n"
      " *    (on 64-byte boundaries they run as fast as the server timed them);\n"
      " *  - only reads its inputs, and overwrites every element of its outputs (their contents\n"
      " *    before the call do not matter); outputs must not overlap inputs or each other;\n"
      " *  - keeps no state and writes nothing but its outputs and its stack: calls may run\n"
      " *    concurrently on different outputs (reentrant, thread-safe); it starts no threads;\n"
      " *  - executes the instructions of its ISA: it returns 0 once computed, or -1 without\n"
      " *    running when this CPU lacks a feature the ISA needs (",
      options.name, "_cpu_missing() says which);\n"
      " *    NAME_tensors(tensors), tensors[i] the base of tensor i, is the same code unchecked.\n"
      " */\n"
      "#ifndef ",
      guard, "\n#define ", guard, "\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
      "/* NULL when this CPU runs every kernel of the library; otherwise a sentence naming the CPU\n"
      " * features it lacks. Reentrant; the string is static. */\n"
      "const char* ",
      options.name, "_cpu_missing(void);\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const ExportedKernel& k = kernels[i];
    const Abi& a = abis[i];
    absl::StrAppend(&h, "\n/* ", k.name, ": ", k.benchmark, "\n", CommentLines(a.program, " *   "));
    for (const AbiTensor& t : a.tensors) {
      absl::StrAppend(&h, " *   ", t.param, ": ", t.output ? "output" : "input", " float",
                      Dims(t.shape), t.param != t.name ? absl::StrCat(" (tensor ", t.name, ")") : "",
                      "\n");
    }
    std::vector<std::string> streamed;
    for (const AbiTensor& t : a.tensors) {
      if (t.streamed) streamed.push_back(t.param);
    }
    if (!streamed.empty()) {
      absl::StrAppend(&h, " *   non-temporal stores (past the caches) into ",
                      absl::StrJoin(streamed, ", "), " when 64-byte aligned\n");
    }
    absl::StrAppend(&h, " *   ", a.flops, " flops; ISA ", a.isa, " (",
                    a.cpu_features.empty() ? "any x86-64" : absl::StrJoin(a.cpu_features, " "),
                    "); ", absl::StrFormat("%.2f", k.gflops), " GFLOPS measured on ", k.host_cpu,
                    " at export");
    if (k.tuned_unix > 0) {
      absl::StrAppend(&h, ";\n *   tuned on ", k.tuned_host_cpu, ", ", Date(k.tuned_unix));
    }
    absl::StrAppend(&h, " */\nint ", k.name, "(", Parameters(a), ");\nvoid ", k.name,
                    "_tensors(float* const* tensors);\n");
  }
  absl::StrAppend(&h, "\n#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n#endif  /* ", guard,
                  " */\n");
  return h;
}

// The C wrappers and the CPU check.
std::string WrapperSource(const std::vector<ExportedKernel>& kernels, const std::vector<Abi>& abis,
                          const LibraryOptions& options) {
  const std::vector<std::string> features = AllFeatures(abis);
  std::string c = absl::StrCat("/* Generated by `looptool export`. */\n#include \"", options.name,
                               ".h\"\n\n#include <stddef.h>\n\n");
  // A bit per feature this CPU lacks.
  absl::StrAppend(&c, "static unsigned missing_features(void) {\n  unsigned missing = 0;\n"
                      "  __builtin_cpu_init();\n");
  for (size_t f = 0; f < features.size(); ++f) {
    if (KnownFeatures().count(features[f])) {
      absl::StrAppend(&c, "  if (!__builtin_cpu_supports(\"", features[f], "\")) missing |= ",
                      1u << f, "u;\n");
    } else {
      absl::StrAppend(&c, "  missing |= ", 1u << f, "u; /* ", features[f],
                      ": no check knows it */\n");
    }
  }
  absl::StrAppend(&c, "  return missing;\n}\n\n");
  // One message per subset of missing features (a table: no state, no allocation).
  const unsigned subsets = 1u << features.size();
  absl::StrAppend(&c, "static const char* const kMessages[", subsets, "] = {\n  NULL,\n");
  for (unsigned m = 1; m < subsets; ++m) {
    std::vector<std::string> names;
    for (size_t f = 0; f < features.size(); ++f) {
      if (m & (1u << f)) names.push_back(features[f]);
    }
    absl::StrAppend(&c, "  \"this CPU lacks ", absl::StrJoin(names, ", "),
                    ", which kernels of ", options.name, " need (they need ",
                    absl::StrJoin(features, ", "), ")\",\n");
  }
  absl::StrAppend(&c, "};\n\nconst char* ", options.name,
                  "_cpu_missing(void) { return kMessages[missing_features()]; }\n");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const Abi& a = abis[i];
    unsigned mask = 0;
    for (const std::string& f : a.cpu_features) {
      mask |= 1u << (std::find(features.begin(), features.end(), f) - features.begin());
    }
    std::vector<std::string> args;
    for (const AbiTensor& t : a.tensors) {
      args.push_back(t.output ? t.param : absl::StrCat("(float*)", t.param));
    }
    absl::StrAppend(&c, "\nint ", kernels[i].name, "(", Parameters(a), ") {\n",
                    "  if (__builtin_expect((missing_features() & ", mask, "u) != 0, 0)) return -1;\n",
                    "  float* const tensors[", a.tensors.size(), "] = {", absl::StrJoin(args, ", "),
                    "};\n  ", kernels[i].name, "_tensors(tensors);\n  return 0;\n}\n");
  }
  return c;
}

// The machine code as an ELF object's text: one global function symbol per kernel, 64-byte
// aligned, its bytes from `bin_files` (.incbin).
std::string AssemblySource(const std::vector<ExportedKernel>& kernels,
                           const std::vector<std::string>& bin_files) {
  std::string s =
      "/* Generated by `looptool export`: LoopTool's machine code, position-independent. */\n"
      "  .section .note.GNU-stack,\"\",@progbits\n"
      "  .section .text.looptool,\"ax\",@progbits\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string sym = kernels[i].name + "_tensors";
    absl::StrAppend(&s, "  .balign 64\n  .globl ", sym, "\n  .type ", sym, ", @function\n", sym,
                    ":\n  .incbin \"", bin_files[i], "\"\n  .size ", sym, ", .-", sym, "\n");
  }
  return s;
}

absl::Status WriteFile(const fs::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path.string()));
  return absl::OkStatus();
}

// Runs `argv` (PATH searched), its output into `log`; INTERNAL with that output when it fails.
absl::Status Run(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  const std::string command = absl::StrJoin(argv, " ");
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot run ", argv[0], " (", std::strerror(rc),
                                            "); install it or name another (--cc, --ar)"));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  std::ifstream in(log);
  std::stringstream output;
  output << in.rdbuf();
  return absl::InternalError(absl::StrCat("`", command, "` failed:\n", output.str()));
}

json Manifest(const std::vector<ExportedKernel>& kernels, const std::vector<Abi>& abis,
              const LibraryOptions& options, int64_t now) {
  json list = json::array();
  for (size_t i = 0; i < kernels.size(); ++i) {
    const ExportedKernel& k = kernels[i];
    const Abi& a = abis[i];
    json tensors = json::array();
    for (const AbiTensor& t : a.tensors) {
      tensors.push_back({{"id", t.id},
                         {"name", t.name},
                         {"param", t.param},
                         {"shape", t.shape},
                         {"role", t.output ? "output" : "input"},
                         {"dtype", "float32"}});
      if (t.streamed) tensors.back()["streamed"] = true;
    }
    json tuned = nullptr;
    if (k.tuned_unix > 0) {
      tuned = {{"host_cpu", k.tuned_host_cpu}, {"search", k.tuned_search},
               {"gflops", k.tuned_gflops},     {"unix", k.tuned_unix},
               {"date", Date(k.tuned_unix)}};
    }
    list.push_back({{"name", k.name},
                    {"symbol", k.name},
                    {"tensors_symbol", k.name + "_tensors"},
                    {"benchmark", k.benchmark},
                    {"program", a.program},
                    {"tensors", std::move(tensors)},
                    {"flops", a.flops},
                    {"isa", a.isa},
                    {"cpu_features", a.cpu_features},
                    {"alignment_bytes", a.alignment_bytes},
                    {"code_bytes", k.code.size()},
                    {"action_space", k.action_space},
                    {"actions", k.actions},
                    {"loop_tree", k.loop_tree},
                    {"gflops", k.gflops},
                    {"peak_gflops", k.peak_gflops},
                    {"host_cpu", k.host_cpu},
                    {"server", k.server},
                    {"tuned", std::move(tuned)}});
  }
  return {{"format", "looptool-kernels-1"},
          {"library", options.name},
          {"header", options.name + ".h"},
          {"shared_library", "lib" + options.name + ".so"},
          {"static_library", "lib" + options.name + ".a"},
          {"check_symbol", options.name + "_cpu_missing"},
          {"exported_unix", now},
          {"exported_date", Date(now)},
          {"kernels", std::move(list)}};
}

// A fresh private directory for the intermediate files, removed on destruction.
class TempDir {
 public:
  static absl::StatusOr<TempDir> Make() {
    std::string pattern = (fs::temp_directory_path() / "looptool-export-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot make a temporary directory: ",
                                              std::strerror(errno)));
    }
    return TempDir(pattern);
  }
  TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  TempDir(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

}  // namespace

std::string KernelName(const std::string& benchmark) {
  std::string last = benchmark.substr(benchmark.find_last_of('/') + 1);
  for (char& c : last) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  if (last.empty() || std::isdigit(static_cast<unsigned char>(last[0]))) last = "_" + last;
  return last;
}

absl::Status CheckLibraryName(const std::string& name) {
  if (!IsIdentifier(name) || IsCKeyword(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("library name '", name, "' is not a C identifier"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LibraryFiles> WriteKernelLibrary(const std::vector<ExportedKernel>& kernels,
                                                const LibraryOptions& options) {
  if (kernels.empty()) return absl::InvalidArgumentError("no kernels to export");
  RETURN_IF_ERROR(CheckLibraryName(options.name));
  std::set<std::string> names;
  std::vector<Abi> abis;
  for (const ExportedKernel& k : kernels) {
    if (!IsIdentifier(k.name) || IsCKeyword(k.name)) {
      return absl::InvalidArgumentError(absl::StrCat("kernel name '", k.name,
                                                     "' is not a C identifier"));
    }
    if (!names.insert(k.name).second || k.name == options.name + "_cpu_missing") {
      return absl::InvalidArgumentError(absl::StrCat("kernel name '", k.name, "' repeats"));
    }
    if (k.code.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", k.name, " has no machine code"));
    }
    ASSIGN_OR_RETURN(Abi abi, ParseAbi(k));
    abis.push_back(std::move(abi));
  }
  if (AllFeatures(abis).size() > 8) {
    return absl::InvalidArgumentError("the kernels need more than 8 distinct CPU features");
  }
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  const fs::path dir = options.directory.empty() ? fs::path(".") : fs::path(options.directory);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create directory ", dir.string(), ": ", ec.message()));
  }
  ASSIGN_OR_RETURN(TempDir tmp, TempDir::Make());
  std::vector<std::string> bins;
  for (const ExportedKernel& k : kernels) {
    bins.push_back((tmp.path() / (k.name + ".bin")).string());
    RETURN_IF_ERROR(WriteFile(bins.back(), k.code));
  }
  LibraryFiles files;
  files.header = (dir / (options.name + ".h")).string();
  files.shared_library = (dir / ("lib" + options.name + ".so")).string();
  files.static_library = (dir / ("lib" + options.name + ".a")).string();
  files.manifest = (dir / (options.name + ".json")).string();
  // The header goes beside the wrappers too, which include it.
  const std::string header = Header(kernels, abis, options, now);
  RETURN_IF_ERROR(WriteFile(tmp.path() / (options.name + ".h"), header));
  const fs::path wrappers = tmp.path() / (options.name + "_wrappers.c");
  const fs::path code = tmp.path() / (options.name + "_code.S");
  RETURN_IF_ERROR(WriteFile(wrappers, WrapperSource(kernels, abis, options)));
  RETURN_IF_ERROR(WriteFile(code, AssemblySource(kernels, bins)));
  const fs::path log = tmp.path() / "tool.log";
  const std::string wrappers_o = (tmp.path() / "wrappers.o").string();
  const std::string code_o = (tmp.path() / "code.o").string();
  RETURN_IF_ERROR(Run({options.cc, "-std=c11", "-O2", "-fPIC", "-Wall", "-Werror", "-c",
                       wrappers.string(), "-o", wrappers_o},
                      log));
  RETURN_IF_ERROR(Run({options.cc, "-fPIC", "-c", code.string(), "-o", code_o}, log));
  // Built beside, then renamed: a reader never sees half a library.
  const std::string so_tmp = files.shared_library + ".tmp";
  const std::string a_tmp = files.static_library + ".tmp";
  fs::remove(a_tmp, ec);
  RETURN_IF_ERROR(Run({options.cc, "-shared", "-Wl,-z,noexecstack", "-Wl,-soname,lib" +
                       options.name + ".so", "-o", so_tmp, wrappers_o, code_o},
                      log));
  RETURN_IF_ERROR(Run({options.ar, "rcsD", a_tmp, wrappers_o, code_o}, log));
  RETURN_IF_ERROR(WriteFile(files.header + ".tmp", header));
  RETURN_IF_ERROR(WriteFile(files.manifest + ".tmp",
                            Manifest(kernels, abis, options, now).dump(2) + "\n"));
  for (const std::string& f : {files.shared_library, files.static_library, files.header,
                               files.manifest}) {
    fs::rename(f + ".tmp", f, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot write ", f, ": ", ec.message()));
    }
  }
  return files;
}

}  // namespace looptool::client
