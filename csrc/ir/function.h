// Foreign functions: StableHLO defined outside the graph (a custom kernel's `func.func`, with
// the private helpers it calls), embedded in every program that calls it. Each program prints a
// function once, next to @main, and calls it with func.call, so XLA fuses it with its
// neighbours; its text is part of the program's signature.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir {

struct Function {
  std::string name;         // what defined it (a kernel's op name), for messages
  std::string symbol;       // the entry's symbol inside programs
  std::string definitions;  // its func.func definitions, renamed apart and all private
  int num_arguments = 0;
  int num_results = 0;
  Signature hash;  // of `definitions`: programs that call it are keyed by it
};

// Parses `text` (a module, or bare func.func definitions) and returns the function whose entry
// is `entry` (or the only function, when there is one). Every function is renamed with a prefix
// derived from `name` and the text, so different kernels never clash in one program; locations
// are dropped. Throws std::invalid_argument naming `name` when the text has no such structure.
std::shared_ptr<Function> ParseFunction(const std::string& name, const std::string& text,
                                        const std::string& entry);

// Records one func.call of `function` on `operands`, with the given result types.
std::vector<Value> MakeCall(const std::shared_ptr<const Function>& function,
                            std::vector<Value> operands, std::vector<TensorType> results);

}  // namespace torch_tpu::ir
