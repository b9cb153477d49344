#include "ir/function.h"

#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>

namespace torch_tpu::ir {

namespace {

// MLIR's bare identifiers: letters, digits, '_', '$' and '.'.
bool IsIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.';
}

// The index just past the string literal that starts at `i` (a '"').
size_t SkipString(const std::string& text, size_t i) {
  for (++i; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return text.size();
}

// The index just past the bracket that closes the one at `i`, skipping string literals.
size_t SkipBalanced(const std::string& text, size_t i) {
  int depth = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      i = SkipString(text, i);
      continue;
    }
    if (c == '(' || c == '{' || c == '[') ++depth;
    if ((c == ')' || c == '}' || c == ']') && --depth == 0) return i + 1;
    ++i;
  }
  return text.size();
}

size_t SkipSpace(const std::string& text, size_t i) {
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  return i;
}

bool StartsWith(const std::string& text, size_t i, const std::string& word) {
  return text.compare(i, word.size(), word) == 0;
}

bool StartsWithWord(const std::string& text, size_t i, const std::string& word) {
  return StartsWith(text, i, word) &&
         (i + word.size() >= text.size() || !IsIdentifierChar(text[i + word.size()]));
}

bool AtLineStart(const std::string& out) {
  size_t k = out.size();
  while (k > 0 && (out[k - 1] == ' ' || out[k - 1] == '\t')) --k;
  return k == 0 || out[k - 1] == '\n';
}

// Drops comments, locations (`loc(...)`) and location aliases (`#loc12 = ...` lines): JAX prints
// them by default, and the aliases live outside the module, where two kernels' would clash.
std::string StripLocations(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (StartsWith(text, i, "#loc") && AtLineStart(out)) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '"') {
      const size_t end = SkipString(text, i);
      out.append(text, i, end - i);
      i = end;
    } else if (StartsWith(text, i, "//")) {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (StartsWith(text, i, "loc(") && (i == 0 || !IsIdentifierChar(text[i - 1])) &&
               (i == 0 || (text[i - 1] != '#' && text[i - 1] != '@' && text[i - 1] != '%'))) {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      i = SkipBalanced(text, i + 3);
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

struct Error {
  const std::string& name;
  [[noreturn]] void operator()(const std::string& message) const {
    throw std::invalid_argument("kernel '" + name + "': " + message);
  }
};

// The text inside the module's braces, or the whole text when it is bare func.func definitions.
// Attribute aliases (other than locations, already dropped) would be lost, so they are refused.
std::string ModuleBody(const std::string& text, const Error& error) {
  std::string body;
  bool seen_module = false;
  for (size_t i = SkipSpace(text, 0); i < text.size(); i = SkipSpace(text, i)) {
    if (text[i] == '#') {
      error("attribute aliases (" + text.substr(i, text.find('=', i) - i) +
            "= ...) are not supported; print the StableHLO without them");
    } else if (StartsWithWord(text, i, "module") && !seen_module && body.empty()) {
      seen_module = true;
      i = SkipSpace(text, i + 6);
      if (i < text.size() && text[i] == '@') {
        while (++i < text.size() && IsIdentifierChar(text[i])) {
        }
      }
      i = SkipSpace(text, i);
      if (StartsWithWord(text, i, "attributes")) i = SkipBalanced(text, SkipSpace(text, i + 10));
      i = SkipSpace(text, i);
      if (i >= text.size() || text[i] != '{') error("expected '{' after the module header");
      const size_t end = SkipBalanced(text, i);
      body = text.substr(i + 1, end - i - 2);
      i = end;
    } else if (!seen_module && body.empty()) {
      body = text.substr(i);
      i = text.size();
    } else {
      error("unexpected text after the module: '" + text.substr(i, 40) + "'");
    }
  }
  return body;
}

struct Header {
  std::string symbol;
  int num_arguments = 0;
  int num_results = 0;
};

// Counts the entries of a parenthesized list starting at `i` (types, or arguments): commas at
// the list's own level, outside <...>, {...}, [...] and strings.
int CountListEntries(const std::string& text, size_t i, size_t* end) {
  *end = SkipBalanced(text, i);
  int entries = 0, angle = 0, nested = 0;
  bool any = false;
  for (size_t k = i + 1; k + 1 < *end; ++k) {
    const char c = text[k];
    if (c == '"') {
      k = SkipString(text, k) - 1;
      any = true;
      continue;
    }
    if (c == '<') ++angle;
    if (c == '>' && text[k - 1] != '-') --angle;
    if (c == '(' || c == '{' || c == '[') ++nested;
    if (c == ')' || c == '}' || c == ']') --nested;
    if (c == ',' && angle == 0 && nested == 0) ++entries;
    if (!std::isspace(static_cast<unsigned char>(c))) any = true;
  }
  return any ? entries + 1 : 0;
}

// Parses `func.func [visibility] @symbol(arguments) [-> results]` starting at `i` (at the
// symbol's '@').
Header ParseHeader(const std::string& text, size_t i, const Error& error) {
  Header header;
  size_t k = i + 1;
  while (k < text.size() && IsIdentifierChar(text[k])) ++k;
  header.symbol = text.substr(i + 1, k - i - 1);
  k = SkipSpace(text, k);
  if (k >= text.size() || text[k] != '(') error("expected '(' after func.func @" + header.symbol);
  size_t end = 0;
  header.num_arguments = CountListEntries(text, k, &end);
  k = SkipSpace(text, end);
  if (!StartsWith(text, k, "->")) return header;
  k = SkipSpace(text, k + 2);
  header.num_results = k < text.size() && text[k] == '(' ? CountListEntries(text, k, &end) : 1;
  return header;
}

struct Definitions {
  std::vector<Header> functions;
  std::vector<size_t> symbol_positions;  // of each function's '@'
};

// Finds the func.func definitions at the body's top level; anything else there is refused.
Definitions FindFunctions(const std::string& body, const Error& error) {
  Definitions found;
  int depth = 0;
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == '"') {
      i = SkipString(body, i);
      continue;
    }
    if (c == '(' || c == '{' || c == '[') ++depth;
    if (c == ')' || c == '}' || c == ']') --depth;
    if (depth == 0 && StartsWithWord(body, i, "func.func")) {
      size_t k = SkipSpace(body, i + 9);
      for (const char* visibility : {"public", "private", "nested"}) {
        if (StartsWithWord(body, k, visibility)) k = SkipSpace(body, k + std::strlen(visibility));
      }
      if (k >= body.size() || body[k] != '@') error("expected a symbol after func.func");
      found.functions.push_back(ParseHeader(body, k, error));
      found.symbol_positions.push_back(k);
      i = k + 1;
      continue;
    }
    if (depth == 0 && found.functions.empty() && !std::isspace(static_cast<unsigned char>(c))) {
      error("expected func.func definitions, found '" + body.substr(i, 40) + "'");
    }
    ++i;
  }
  if (found.functions.empty()) error("its StableHLO has no func.func");
  return found;
}

// Renames every defined symbol (definitions and references) to prefix_symbol and makes every
// function private: only @main is public in a program.
std::string Rename(const std::string& body, const std::set<std::string>& symbols,
                   const std::string& prefix) {
  std::string out;
  out.reserve(body.size() + 64);
  int depth = 0;
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == '"') {
      const size_t end = SkipString(body, i);
      out.append(body, i, end - i);
      i = end;
      continue;
    }
    if (c == '(' || c == '{' || c == '[') ++depth;
    if (c == ')' || c == '}' || c == ']') --depth;
    if (depth == 0 && StartsWithWord(body, i, "func.func")) {
      out += "func.func private ";
      i = SkipSpace(body, i + 9);
      for (const char* visibility : {"public", "private", "nested"}) {
        if (StartsWithWord(body, i, visibility)) i = SkipSpace(body, i + std::strlen(visibility));
      }
      continue;
    }
    if (c == '@') {
      size_t k = i + 1;
      while (k < body.size() && IsIdentifierChar(body[k])) ++k;
      const std::string symbol = body.substr(i + 1, k - i - 1);
      if (symbols.count(symbol)) {
        out += "@" + prefix + "_" + symbol;
        i = k;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

std::string Trim(const std::string& text) {
  const size_t begin = SkipSpace(text, 0);
  size_t end = text.size();
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

std::string SymbolPrefix(const std::string& name, const std::string& body) {
  std::string prefix;
  for (char c : name.substr(name.rfind(':') == std::string::npos ? 0 : name.rfind(':') + 1)) {
    prefix += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  Hasher h;
  h.Add(body);
  return (prefix.empty() || std::isdigit(static_cast<unsigned char>(prefix[0])) ? "k" : "") +
         prefix + "_" + h.Finish().ToHex().substr(0, 12);
}

}  // namespace

std::shared_ptr<Function> ParseFunction(const std::string& name, const std::string& text,
                                        const std::string& entry) {
  const Error error{name};
  const std::string body = ModuleBody(StripLocations(text), error);
  const Definitions definitions = FindFunctions(body, error);
  std::set<std::string> symbols;
  const Header* entry_header = nullptr;
  std::string defined;
  for (const Header& header : definitions.functions) {
    if (!symbols.insert(header.symbol).second) error("func.func @" + header.symbol + " twice");
    if (header.symbol == entry) entry_header = &header;
    defined += (defined.empty() ? "@" : ", @") + header.symbol;
  }
  if (entry_header == nullptr && definitions.functions.size() == 1) {
    entry_header = &definitions.functions[0];
  }
  if (entry_header == nullptr) error("no func.func @" + entry + " (it defines " + defined + ")");
  auto function = std::make_shared<Function>();
  function->name = name;
  const std::string prefix = SymbolPrefix(name, body);
  function->symbol = prefix + "_" + entry_header->symbol;
  function->definitions = Trim(Rename(body, symbols, prefix));
  function->num_arguments = entry_header->num_arguments;
  function->num_results = entry_header->num_results;
  Hasher h;
  h.Add(function->definitions);
  function->hash = h.Finish();
  return function;
}

std::vector<Value> MakeCall(const std::shared_ptr<const Function>& function,
                            std::vector<Value> operands, std::vector<TensorType> results) {
  if (results.empty())
    throw std::invalid_argument("kernel '" + function->name + "' has no results");
  return MakeMultiOp("func.call", std::move(operands), std::move(results),
                     "callee = @" + function->symbol, {}, function);
}

}  // namespace torch_tpu::ir
