#include "backend/codegen/kernel_abi.h"

#include "backend/ir/printer.h"
#include "nlohmann/json.hpp"

namespace looptool {

std::string KernelAbiJson(const Program& program, Isa isa, const std::vector<int>& streamed) {
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t t = 0; t < program.tensors().size(); ++t) {
    const Tensor& tensor = program.tensor(static_cast<int>(t));
    tensors.push_back({{"id", t},
                       {"name", tensor.name},
                       {"shape", tensor.shape},
                       {"role", tensor.is_output ? "output" : "input"}});
  }
  nlohmann::json abi = {{"entry", "void kernel(float* const* tensors)"},
                        {"isa", Traits(isa).name},
                        {"cpu_features", CpuFeatures(isa)},
                        {"program", PrintProgram(program)},
                        {"flops", program.Flops()},
                        {"alignment_bytes", 4},
                        {"tensors", std::move(tensors)}};
  if (!streamed.empty()) abi["streamed_outputs"] = streamed;
  return abi.dump();
}

}  // namespace looptool
