#include "import/dense_def.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/tmai_writer.h"

namespace tinyai {
namespace {

// ---- Dense networks ----

constexpr uint64_t kMaxDenseWidth = limits::kMaxDenseWidth;  // floats per row of any layer's input or output

// A name or word of the definition, quoted for a message and escaped
// (common/printable.h): a NUL or a control byte in it neither cuts the
// message nor garbles it.
std::string Quoted(const std::string& s) { return "'" + std::string(Printable(s).c_str()) + "'"; }

bool IsDenseActivation(const std::string& a) { return a == "none" || a == "relu" || a == "tanh"; }

bool IsLayerNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// Each layer name of def and the first layer that has it (one hash lookup
// per name keeps a definition of many layers linear).
using DenseNameIndex = std::unordered_map<std::string, size_t>;
DenseNameIndex IndexDenseNames(const DenseNetDef& def) {
  DenseNameIndex index;
  index.reserve(def.layers.size());
  for (size_t l = 0; l < def.layers.size(); ++l) index.emplace(def.layers[l].name, l);
  return index;
}

// Layer l of def, checked against the others: a valid unique name, a width,
// an activation, and inputs that name the network input or earlier layers,
// each at most once, at most limits::kMaxDenseInputs of them, all of one
// width. Fills *producers (layer indices, -1 for the network input) and *in
// (the input width); on failure returns false with *why.
bool ResolveDenseLayer(const DenseNetDef& def, const DenseNameIndex& index, size_t l,
                       std::vector<int32_t>* producers, int32_t* in, std::string* why) {
  const DenseLayerDef& d = def.layers[l];
  const std::string quoted = Quoted(d.name);
  if (d.name.empty()) {
    *why = "a layer needs a name";
    return false;
  }
  for (char c : d.name) {
    if (!IsLayerNameChar(c)) {
      *why = "layer name " + quoted + " may hold only letters, digits, '_', '-' and '.'";
      return false;
    }
  }
  if (d.name == "input") {
    *why = "'input' names the network input; it cannot name a layer";
    return false;
  }
  const auto first = index.find(d.name);
  if (first != index.end() && first->second < l) {
    *why = "duplicate layer name " + quoted + " (layer " + std::to_string(first->second) + " has it)";
    return false;
  }
  if (d.out <= 0 || static_cast<uint64_t>(d.out) > kMaxDenseWidth) {
    *why = "layer " + quoted + ": out=" + std::to_string(d.out) + " is not in 1.." + std::to_string(kMaxDenseWidth);
    return false;
  }
  if (!d.activation.empty() && !IsDenseActivation(d.activation)) {
    *why = "layer " + quoted + ": unknown activation " + Quoted(d.activation) + " (none, relu or tanh)";
    return false;
  }
  producers->clear();
  std::vector<std::string> names = d.inputs;
  if (names.empty()) names.push_back(l == 0 ? std::string("input") : def.layers[l - 1].name);
  *in = 0;
  std::string first_input;
  for (const std::string& n : names) {
    int32_t p = -2;
    if (n == "input") {
      p = -1;
    } else {
      const auto it = index.find(n);
      if (it != index.end()) p = static_cast<int32_t>(it->second);
      if (p == -2) {
        *why = "layer " + quoted + ": input " + Quoted(n) + " names no layer";
        return false;
      }
      if (static_cast<size_t>(p) >= l) {
        *why = "layer " + quoted + ": input " + Quoted(n) + " is " +
               (static_cast<size_t>(p) == l ? std::string("the layer itself") : "a later layer (layer " + std::to_string(p) + ")") +
               "; a layer reads only the input and earlier layers";
        return false;
      }
    }
    for (size_t k = 0; k < producers->size(); ++k) {
      if ((*producers)[k] == p) {
        *why = "layer " + quoted + ": input " + Quoted(n) + " is named twice; each input at most once (to add a layer's "
               "output twice, give it a layer of its own)";
        return false;
      }
    }
    if (producers->size() >= static_cast<size_t>(limits::kMaxDenseInputs)) {
      *why = "layer " + quoted + ": " + std::to_string(names.size()) + " inputs; a layer sums at most " +
             std::to_string(limits::kMaxDenseInputs);
      return false;
    }
    const int32_t width = p < 0 ? def.input_dim : def.layers[static_cast<size_t>(p)].out;
    if (producers->empty()) {
      *in = width;
      first_input = n;
    } else if (width != *in) {
      *why = "layer " + quoted + ": inputs of different widths: " + Quoted(first_input) + " is " + std::to_string(*in) +
             " wide, " + Quoted(n) + " " + std::to_string(width);
      return false;
    }
    producers->push_back(p);
  }
  return true;
}

// The network's output (the layers no later layer reads, concatenated) is at
// most limits::kMaxDenseOutputWidth floats wide, as the runtime requires.
bool CheckDenseOutputWidth(const DenseNetDef& def, const std::vector<std::vector<int32_t>>& producers,
                           std::string* why) {
  std::vector<bool> read(def.layers.size(), false);
  for (const std::vector<int32_t>& ps : producers) {
    for (int32_t p : ps) {
      if (p >= 0) read[static_cast<size_t>(p)] = true;
    }
  }
  int64_t width = 0;
  for (size_t l = 0; l < def.layers.size(); ++l) width += read[l] ? 0 : def.layers[l].out;
  if (width > limits::kMaxDenseOutputWidth) {
    *why = "the network's output (the layers no later layer reads) is " + std::to_string(width) +
           " floats wide; at most " + std::to_string(limits::kMaxDenseOutputWidth);
    return false;
  }
  return true;
}

// The whole definition (for definitions built in code); *producers and *ins
// receive each layer's resolution.
TinyAIStatus CheckDenseDefinition(const DenseNetDef& def, std::vector<std::vector<int32_t>>* producers,
                                  std::vector<int32_t>* ins) {
  if (def.input_dim <= 0 || static_cast<uint64_t>(def.input_dim) > kMaxDenseWidth) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: input %d is not in 1..%llu", def.input_dim,
                    static_cast<unsigned long long>(kMaxDenseWidth));
  }
  if (def.layers.empty() || def.layers.size() > limits::kMaxDenseLayers) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: %zu layers; it needs 1..%u", def.layers.size(),
                    limits::kMaxDenseLayers);
  }
  producers->assign(def.layers.size(), std::vector<int32_t>());
  ins->assign(def.layers.size(), 0);
  const DenseNameIndex index = IndexDenseNames(def);
  for (size_t l = 0; l < def.layers.size(); ++l) {
    std::string why;
    if (!ResolveDenseLayer(def, index, l, &(*producers)[l], &(*ins)[l], &why)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: layer %zu: %s", l, why.c_str());
    }
  }
  std::string why;
  if (!CheckDenseOutputWidth(def, *producers, &why)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: %s", why.c_str());
  }
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus ParseDenseDefinition(const std::string& text, DenseNetDef* out) {
  DenseNetDef def;
  bool have_name = false, have_input = false, have_seed = false;
  std::vector<int> layer_lines;  // the line of each layer
  int line_no = 0;
  size_t pos = 0;
  auto fail = [&](const std::string& why) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: %s", line_no, why.c_str());
  };
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::vector<std::string> tokens;
    for (size_t i = 0; i < line.size();) {
      if (std::isspace(static_cast<unsigned char>(line[i]))) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      tokens.push_back(line.substr(i, j - i));
      i = j;
    }
    if (tokens.empty()) continue;
    const std::string& directive = tokens[0];
    if (directive == "name") {
      if (have_name) return fail("'name' is given twice");
      if (tokens.size() != 2) return fail("'name' takes one word, got " + std::to_string(tokens.size() - 1));
      def.name = tokens[1];
      have_name = true;
    } else if (directive == "input" || directive == "seed") {
      bool& seen = directive == "input" ? have_input : have_seed;
      if (seen) return fail(Quoted(directive) + " is given twice");
      if (tokens.size() != 2) return fail(Quoted(directive) + " takes one number, got " + std::to_string(tokens.size() - 1) + " values");
      uint64_t v = 0;
      if (directive == "input") {
        if (!ParseDecimal(tokens[1], kMaxDenseWidth, &v) || v == 0) {
          return fail("input " + Quoted(tokens[1]) + " is not a number in 1.." + std::to_string(kMaxDenseWidth));
        }
        def.input_dim = static_cast<int32_t>(v);
      } else {
        if (!ParseDecimal(tokens[1], UINT64_MAX, &v)) return fail("seed " + Quoted(tokens[1]) + " is not a number");
        def.seed = v;
      }
      seen = true;
    } else if (directive == "layer") {
      if (!have_input) return fail("missing 'input' before the first layer (say 'input N': floats per input row)");
      if (tokens.size() < 2 || tokens[1].find('=') != std::string::npos) return fail("'layer' needs a name before its keys");
      DenseLayerDef d;
      d.name = tokens[1];
      d.activation = "none";
      bool have_out = false, have_act = false, have_bias = false, have_inputs = false;
      for (size_t t = 2; t < tokens.size(); ++t) {
        const std::string& item = tokens[t];
        size_t eq = item.find('=');
        if (eq == std::string::npos) return fail("layer " + Quoted(d.name) + ": " + Quoted(item) + " is not key=value");
        const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        bool* seen = key == "out" ? &have_out : key == "act" ? &have_act : key == "bias" ? &have_bias
                   : key == "inputs" ? &have_inputs : nullptr;
        if (!seen) return fail("layer " + Quoted(d.name) + ": unknown key " + Quoted(key) + " (out, act, inputs, bias)");
        if (*seen) return fail("layer " + Quoted(d.name) + ": " + Quoted(key) + " is given twice");
        *seen = true;
        if (key == "out") {
          uint64_t v = 0;
          if (!ParseDecimal(value, kMaxDenseWidth, &v) || v == 0) {
            return fail("layer " + Quoted(d.name) + ": out " + Quoted(value) + " is not a number in 1.." + std::to_string(kMaxDenseWidth));
          }
          d.out = static_cast<int32_t>(v);
        } else if (key == "act") {
          if (!IsDenseActivation(value)) {
            return fail("layer " + Quoted(d.name) + ": unknown activation " + Quoted(value) + " (none, relu or tanh)");
          }
          d.activation = value;
        } else if (key == "bias") {
          if (value != "0" && value != "1") return fail("layer " + Quoted(d.name) + ": bias " + Quoted(value) + " is not 0 or 1");
          d.bias = value == "1";
        } else {
          size_t p = 0;
          while (true) {
            size_t comma = value.find(',', p);
            if (comma == std::string::npos) comma = value.size();
            std::string name = value.substr(p, comma - p);
            if (name.empty()) return fail("layer " + Quoted(d.name) + ": inputs " + Quoted(value) + " has an empty name");
            d.inputs.push_back(name);
            if (comma == value.size()) break;
            p = comma + 1;
          }
        }
      }
      if (!have_out) return fail("layer " + Quoted(d.name) + " has no out=N");
      def.layers.push_back(d);
      layer_lines.push_back(line_no);
    } else {
      return fail("unknown directive " + Quoted(directive) + " (name, input, seed, layer)");
    }
  }
  if (line_no == 0) line_no = 1;
  if (!have_input) return fail("missing 'input' (floats per input row)");
  if (def.layers.empty()) return fail("the definition has no layers");
  if (def.layers.size() > limits::kMaxDenseLayers) {
    return fail("the definition has " + std::to_string(def.layers.size()) + " layers; at most " +
                std::to_string(limits::kMaxDenseLayers));
  }
  const DenseNameIndex index = IndexDenseNames(def);
  std::vector<std::vector<int32_t>> producers(def.layers.size());
  for (size_t l = 0; l < def.layers.size(); ++l) {
    int32_t in = 0;
    std::string why;
    if (!ResolveDenseLayer(def, index, l, &producers[l], &in, &why)) {
      line_no = layer_lines[l];
      return fail(why);
    }
  }
  std::string why;
  if (!CheckDenseOutputWidth(def, producers, &why)) return fail(why);
  *out = def;
  return TINYAI_OK;
}

TinyAIStatus WriteDenseModel(const DenseNetDef& def, const char* outPath, const WriteOptions& options,
                             TmaiWriteStats* stats) {
  std::vector<std::vector<int32_t>> producers;
  std::vector<int32_t> ins;
  TINYAI_RETURN_IF_ERROR(CheckDenseDefinition(def, &producers, &ins));
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  TmaiWriter w;
  UseRowEncoder(&w, options);
  w.SetCompression(options.codec, options.level);
  w.AddMetaString("general.architecture", "dense");
  if (!def.name.empty()) w.AddMetaString("general.name", def.name);
  AddSourceMetadata(&w, "dense", nullptr);
  w.AddMetaInt("general.seed", static_cast<int64_t>(def.seed));
  w.AddMetaInt("dense.input_dim", def.input_dim);
  w.AddMetaInt("dense.layers", static_cast<int64_t>(def.layers.size()));
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const DenseLayerDef& d = def.layers[l];
    const std::string p = "dense." + std::to_string(l) + ".";
    std::string inputs;
    for (int32_t q : producers[l]) inputs += (inputs.empty() ? "" : ",") + std::to_string(q);
    w.AddMetaString(p + "activation", d.activation.empty() ? std::string("none") : d.activation);
    w.AddMetaString(p + "inputs", inputs);
    w.AddMetaString(p + "name", d.name);
  }
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const DenseLayerDef& d = def.layers[l];
    const std::string p = "dense." + std::to_string(l) + ".";
    w.AddLayer(TINYAI_LAYER_DENSE, static_cast<int32_t>(l));
    w.AddTensor(p + "weight", TINYAI_ROLE_DENSE_WEIGHT, options.matrix_dtype,
                {static_cast<uint64_t>(d.out), static_cast<uint64_t>(ins[l])});
    if (d.bias) w.AddTensor(p + "bias", TINYAI_ROLE_DENSE_BIAS, TINYAI_DTYPE_F32, {static_cast<uint64_t>(d.out)});
  }
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  uint64_t rng = def.seed;
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const DenseLayerDef& d = def.layers[l];
    const uint64_t out = static_cast<uint64_t>(d.out), in = static_cast<uint64_t>(ins[l]);
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, out * in, std::sqrt(3.0f / static_cast<float>(in)), 0.0f, &rng));
    if (d.bias) TINYAI_RETURN_IF_ERROR(WriteRandom(&w, out, 0.1f, 0.0f, &rng));
  }
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
