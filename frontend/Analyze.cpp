//===- Analyze.cpp - Checking a .plan syntax tree against the schema ------===//
//
// The analyzer walks the syntax tree one section at a time. A section is a
// table of its keys: the name, whether it is required, and how its value is
// read into the PlanSpec, which fixes the value's type. What the tables leave
// out lives where the C++ builder sees it too: plain defaults are the PlanSpec
// initializers (or the preset / device the plan starts from), defaults that
// depend on other keys are applyDerivedDefaults, and value ranges and
// combinations are checkPlan (Checks.cpp). docs/language.md documents it all.
//
// A key whose value is reported as wrong, or that is required and missing,
// goes into `unchecked`, and checkPlan skips the checks that read it: each
// mistake is reported once, and every mistake in the file is reported.
//
// `plan.locs` records every key given, by dotted path, at its value: that is
// what the user edits when a check rejects it (`model` points at the preset
// name, `cluster.gpu` at the device name or its `{`, `train.optimizer.lr` at
// the argument). Sections, which have no value of their own (`train { ... }`,
// `parallel.offload`), point at their name where it first appears.
//
//===----------------------------------------------------------------------===//

#include "frontend/Analyze.h"
#include "frontend/DeviceFile.h"
#include "frontend/HuggingFaceConfig.h"
#include "frontend/Models.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>
#include <functional>
#include <tuple>

using namespace plan;
using llvm::ArrayRef;
using llvm::formatv;
using llvm::SMLoc;
using llvm::StringRef;
using syntax::Value;
using syntax::ValueKind;

//===----------------------------------------------------------------------===//
// Spellings of the enumerations
//===----------------------------------------------------------------------===//

namespace {
template <typename E> struct Spelling {
  StringRef name;
  E value;
};
} // namespace

/// Every spelling of an enumeration: the generated stringify of each value
/// (PlanEnums.td; the values are 0..maxValue), then the language's aliases.
template <typename E>
static llvm::SmallVector<Spelling<E>>
spellingsOf(unsigned maxValue, ArrayRef<Spelling<E>> aliases = {}) {
  llvm::SmallVector<Spelling<E>> spellings;
  for (unsigned i = 0; i <= maxValue; ++i)
    spellings.push_back({stringify(static_cast<E>(i)), static_cast<E>(i)});
  spellings.append(aliases.begin(), aliases.end());
  return spellings;
}

// PyTorch DDP, FSDP (its default strategy, and ShardingStrategy's names as
// Accelerate's fsdp_sharding_strategy writes them) and the DeepSpeed ZeRO
// stages. DeepSpeed's stage 2 keeps whole parameters on every rank between
// steps, as zero1 does, and shards the gradients as they are reduced, as
// zero1 does with grad_sync = every_micro_batch (stage 1 is last_micro_batch);
// FSDP's SHARD_GRAD_OP also shards the parameters between steps.
static constexpr Spelling<Sharding> shardingAliases[] = {
    {"ddp", Sharding::NoShard},
    {"zero0", Sharding::NoShard},
    {"zero2", Sharding::Zero1},
    {"zero3", Sharding::FullShard},
    {"fsdp", Sharding::FullShard},
    {"FULL_SHARD", Sharding::FullShard},
    {"SHARD_GRAD_OP", Sharding::ShardGradOp},
    {"NO_SHARD", Sharding::NoShard},
    {"HYBRID_SHARD", Sharding::HybridShard}};

// Without it `gpu` would be a near miss for `cpu`, the opposite of its sense.
static constexpr Spelling<MemorySpace> memorySpaceAliases[] = {
    {"gpu", MemorySpace::Device}};

template <typename E>
static llvm::SmallVector<StringRef> namesOf(ArrayRef<Spelling<E>> spellings) {
  return llvm::map_to_vector(spellings,
                             [](const Spelling<E> &s) { return s.name; });
}

//===----------------------------------------------------------------------===//
// Units
//===----------------------------------------------------------------------===//

namespace {
enum class Quantity { Size, Bandwidth, Time };

struct Unit {
  StringRef name;
  Quantity quantity;
  double factor; // bytes, or bytes per second
};
} // namespace

static constexpr double KiB = 1024.0, MiB = KiB * 1024, GiB = MiB * 1024,
                        TiB = GiB * 1024;

static constexpr Unit units[] = {
    {"B", Quantity::Size, 1},
    {"KB", Quantity::Size, 1e3},
    {"MB", Quantity::Size, 1e6},
    {"GB", Quantity::Size, 1e9},
    {"TB", Quantity::Size, 1e12},
    {"KiB", Quantity::Size, KiB},
    {"MiB", Quantity::Size, MiB},
    {"GiB", Quantity::Size, GiB},
    {"TiB", Quantity::Size, TiB},
    {"B/s", Quantity::Bandwidth, 1},
    {"KB/s", Quantity::Bandwidth, 1e3},
    {"MB/s", Quantity::Bandwidth, 1e6},
    {"GB/s", Quantity::Bandwidth, 1e9},
    {"TB/s", Quantity::Bandwidth, 1e12},
    {"KiB/s", Quantity::Bandwidth, KiB},
    {"MiB/s", Quantity::Bandwidth, MiB},
    {"GiB/s", Quantity::Bandwidth, GiB},
    {"TiB/s", Quantity::Bandwidth, TiB},
    // Network links are quoted in bits.
    {"Mb/s", Quantity::Bandwidth, 1e6 / 8},
    {"Gb/s", Quantity::Bandwidth, 1e9 / 8},
    {"Tb/s", Quantity::Bandwidth, 1e12 / 8},
    {"s", Quantity::Time, 1},
    {"ms", Quantity::Time, 1e-3},
    {"us", Quantity::Time, 1e-6},
    {"ns", Quantity::Time, 1e-9},
};

static const Unit *lookupUnit(StringRef name) {
  const Unit *it =
      llvm::find_if(units, [&](const Unit &u) { return u.name == name; });
  return it == std::end(units) ? nullptr : it;
}

//===----------------------------------------------------------------------===//
// Suggestions
//===----------------------------------------------------------------------===//

static std::string quotedList(ArrayRef<StringRef> names, StringRef lastJoin) {
  std::string out;
  for (auto [i, name] : llvm::enumerate(names)) {
    if (i)
      out += i + 1 == names.size() ? lastJoin.str() : ", ";
    out += ("'" + name + "'").str();
  }
  return out;
}

/// The candidates `word` is likely a slip for: one that differs only in case
/// or by a small edit, the few that `word` starts ("h100" for h100_sxm and
/// h100_pcie), or the longest that starts `word` ("cosine_annealing" for
/// cosine).
static llvm::SmallVector<StringRef>
likelyMeant(StringRef word, ArrayRef<StringRef> candidates) {
  for (StringRef candidate : candidates)
    if (candidate.equals_insensitive(word))
      return {candidate};
  if (word.size() >= 3) {
    llvm::SmallVector<StringRef> extensions;
    for (StringRef candidate : candidates)
      if (candidate.starts_with(word))
        extensions.push_back(candidate);
    if (!extensions.empty() && extensions.size() <= 4)
      return extensions;
  }
  StringRef close = closestMatch(word, candidates);
  if (!close.empty())
    return {close};
  StringRef longestStem;
  for (StringRef candidate : candidates)
    if (candidate.size() >= 3 && word.starts_with(candidate) &&
        candidate.size() > longestStem.size())
      longestStem = candidate;
  if (!longestStem.empty())
    return {longestStem};
  return {};
}

static std::string didYouMean(StringRef word, ArrayRef<StringRef> candidates) {
  llvm::SmallVector<StringRef> meant = likelyMeant(word, candidates);
  if (meant.empty())
    return "";
  return "; did you mean " + quotedList(meant, " or ") + "?";
}

/// A suggestion when there is a good one, else the whole list.
static std::string suggestOrList(StringRef word, ArrayRef<StringRef> candidates,
                                 StringRef listIntro = "expected one of") {
  std::string suggestion = didYouMean(word, candidates);
  if (!suggestion.empty())
    return suggestion;
  return ("; " + listIntro + ": " + llvm::join(candidates, ", ")).str();
}

//===----------------------------------------------------------------------===//
// Keys as written: nested blocks and dotted keys
//===----------------------------------------------------------------------===//

namespace {

/// One item that sets something in a section: an item of the section's own
/// block, or a dotted item further out whose key leads into the section
/// (`parallel.offload.params = cpu` is an entry of `parallel` with path
/// "offload.params", and of `parallel.offload` with path "params").
struct Entry {
  const syntax::Item *item;
  StringRef path; // the rest of the item's key, from this section on
  SMLoc keyLoc;   // where `path` starts in the source

  StringRef head() const { return path.split('.').first; }
  /// Whether the item sets this key itself rather than a key inside it.
  bool setsKey() const { return !path.contains('.'); }
  const Value &value() const { return item->value; }
  Entry tail() const;
};
using Entries = llvm::SmallVector<Entry, 8>;

/// Everything the user wrote for one key of a section.
struct KeyGroup {
  std::string path;   // from the top: "parallel.offload"; "" for the file
  SMLoc keyLoc;       // where the key is first named
  const Value *value; // of the first item that sets the key, or null
  Entries children;   // the keys under it: its block's items, dotted items
};

using ValueReader =
    std::function<bool(const Value &value, const std::string &path)>;
using GroupReader = std::function<void(const KeyGroup &group)>;

enum class Need { Optional, Required };

/// One key of a section. A plain key has a value reader; a key with keys of
/// its own (a section, `model`, `cluster.gpu`) has a group reader.
struct KeyRule {
  StringRef name;
  Need need;
  ValueReader readValue;
  GroupReader readGroup;
};

/// What a section says beyond the generic messages.
struct SectionWording {
  /// Why a key is unknown here, when there is more to say than "did you
  /// mean" (a key of another model family); "" for the generic message.
  std::function<std::string(StringRef key)> unknownKeyReason;
  /// Appended to "'model' is missing required key 'vocab'".
  std::string missingReason;
};

/// One argument of a call-like value (`adamw(lr = ...)`).
struct Param {
  StringRef name;
  Need need;
  ValueReader read;
};

/// One alternative of a key written `name` or `name(arguments)`.
struct Form {
  StringRef name;
  /// The first argument may omit its name: `static(1024)`, `adamw(1e-4)`.
  bool leadingPositional;
  std::vector<Param> params;
  std::function<void()> select; // records the choice of this form
  StringRef example;            // shown when a required argument is missing
};

} // namespace

/// Where `part`, a piece of `item.key`, is in the source. Falls back to the
/// key's start when the source does not spell the key as stored (an override
/// path, blanks around the dots).
static SMLoc locInKey(const syntax::Item &item, StringRef part) {
  const char *begin = item.keyRange.Start.getPointer();
  const char *end = item.keyRange.End.getPointer();
  size_t size = item.key.size();
  if (!begin || !end || end - begin < static_cast<ptrdiff_t>(size) ||
      StringRef(begin, size) != item.key)
    return item.keyLoc();
  return SMLoc::getFromPointer(begin + (part.data() - item.key.data()));
}

Entry Entry::tail() const {
  StringRef rest = path.split('.').second;
  return {item, rest, locInKey(*item, rest)};
}

static void appendItems(const syntax::Block &block, Entries &out) {
  for (const syntax::Item &item : block.items)
    out.push_back({&item, item.key, locInKey(item, item.key)});
}

static std::string joinPath(StringRef section, StringRef key) {
  return section.empty() ? key.str() : (section + "." + key).str();
}

/// What a value is, for "expects X, got Y": numbers as written, names quoted,
/// other kinds by their kind.
static std::string describe(const Value &v) {
  switch (v.kind) {
  case ValueKind::Number:
    return v.spelling();
  case ValueKind::Identifier:
    return "'" + v.spelling() + "'";
  default:
    return v.kindName().str();
  }
}

//===----------------------------------------------------------------------===//
// The analyzer
//===----------------------------------------------------------------------===//

namespace {

class Analyzer {
public:
  Analyzer(DiagEmitter &diag, StringRef defaultName) : diag(diag) {
    plan.name = defaultName.str();
  }

  std::optional<PlanSpec> run(const syntax::Block &root);

private:
  // Sections.
  void readKeys(const KeyGroup &section, ArrayRef<KeyRule> rules,
                const SectionWording &wording = {});
  void reportUnknownKey(const KeyGroup &section, StringRef key, SMLoc loc,
                        ArrayRef<KeyRule> rules, const SectionWording &wording,
                        llvm::StringSet<> &suggested);
  bool readLeaf(const KeyRule &rule, const Value &value,
                const std::string &path);
  GroupReader section(std::function<std::vector<KeyRule>()> rules,
                      SectionWording wording = {});
  void readModel(const KeyGroup &group);
  void readDevice(const KeyGroup &group);
  /// `gpu = "FILE"`: the device file's figures (DeviceFile.h).
  void readDeviceFile(const Value &v);
  /// `cluster`; `deviceFile`: whether `gpu` names a device file, whose
  /// `host` may give host_memory.
  void readCluster(const KeyGroup &group);
  std::vector<KeyRule> clusterKeys(bool deviceFile);
  /// The device file `gpu` named, once read.
  std::optional<DeviceFile> deviceFile;
  std::vector<KeyRule> trainKeys();
  std::vector<KeyRule> parallelKeys();
  static SectionWording parallelWording();
  std::vector<KeyRule> offloadKeys();

  // Values.
  using ReadMethod = bool (Analyzer::*)(const Value &, const std::string &);
  ValueReader method(ReadMethod read);
  ValueReader integer(int64_t &field);
  ValueReader real(double &field);
  ValueReader boolean(bool &field);
  ValueReader size(int64_t &field);
  ValueReader bandwidth(double &field);
  ValueReader time(double &field);
  template <typename E>
  ValueReader oneOf(E &field, llvm::SmallVector<Spelling<E>> spellings,
                    StringRef noun);

  bool readInteger(const Value &v, const std::string &path, int64_t &out);
  bool readReal(const Value &v, const std::string &path, double &out);
  bool readBool(const Value &v, const std::string &path, bool &out);
  bool readString(const Value &v, const std::string &path, std::string &out);
  bool readQuantity(const Value &v, const std::string &path, Quantity quantity,
                    double &out);
  bool readSize(const Value &v, const std::string &path, int64_t &out);
  template <typename E>
  bool readEnum(const Value &v, const std::string &path,
                ArrayRef<Spelling<E>> spellings, StringRef noun, E &out);
  bool readForm(const Value &v, const std::string &path, StringRef noun,
                ArrayRef<Form> forms);
  bool readArguments(const Value &v, const std::string &path, const Form &form);
  bool readPair(const Value &v, const std::string &path, StringRef shape,
                const ValueReader &element);

  bool readOptimizer(const Value &v, const std::string &path);
  bool readLossScale(const Value &v, const std::string &path);
  bool readLRSchedule(const Value &v, const std::string &path);
  bool readGradClip(const Value &v, const std::string &path);
  bool readWrap(const Value &v, const std::string &path);
  bool readMesh(const Value &v, const std::string &path);
  bool readPipelineSchedule(const Value &v, const std::string &path);
  bool readStages(const Value &v, const std::string &path);
  bool readRopeScaling(const Value &v, const std::string &path);
  /// `model.lora { ... }` and `model.base`, once the family is known.
  GroupReader loraSection(ModelFamily family);
  bool readLoraTargets(const Value &v, const std::string &path,
                       ModelFamily family, std::vector<std::string> &out);
  void finishLora(ModelFamily family, std::optional<BaseStorage> base);
  /// What `model.lora` gives under PEFT's names (r, lora_alpha, ...).
  LoraSpec loraPeftSpelling;
  /// `model = hf("path")`: the model of an HF config.json.
  bool readHuggingFace(const Value &v);

  bool typeError(const Value &v, const std::string &path,
                 const llvm::Twine &expected);
  SMLoc fileStart(const syntax::Block &root) const;

  DiagEmitter &diag;
  PlanSpec plan;
  /// Keys reported as wrong or missing: checkPlan does not look at them.
  llvm::StringSet<> unchecked;
};

} // namespace

std::optional<PlanSpec> Analyzer::run(const syntax::Block &root) {
  unsigned errorsBefore = diag.numErrors();

  KeyGroup file{"", fileStart(root), nullptr, {}};
  appendItems(root, file.children);
  KeyRule topKeys[] = {
      {"name", Need::Optional,
       [this](const Value &v, const std::string &path) {
         return readString(v, path, plan.name);
       },
       nullptr},
      {"model", Need::Required, nullptr,
       [this](const KeyGroup &g) { readModel(g); }},
      {"cluster", Need::Required, nullptr,
       [this](const KeyGroup &g) { readCluster(g); }},
      {"train", Need::Required, nullptr,
       section([this] { return trainKeys(); })},
      {"parallel", Need::Optional, nullptr,
       section([this] { return parallelKeys(); }, parallelWording())},
  };
  readKeys(file, topKeys);

  applyDerivedDefaults(plan);
  checkPlan(plan, diag, unchecked);
  if (diag.numErrors() != errorsBefore)
    return std::nullopt;
  return std::move(plan);
}

SMLoc Analyzer::fileStart(const syntax::Block &root) const {
  const llvm::SourceMgr *sourceMgr = diag.getSourceMgr();
  if (!sourceMgr || sourceMgr->getNumBuffers() == 0)
    return SMLoc();
  unsigned buffer = 0;
  if (!root.items.empty())
    buffer = sourceMgr->FindBufferContainingLoc(root.items.front().keyLoc());
  if (buffer == 0)
    buffer = sourceMgr->getMainFileID();
  return SMLoc::getFromPointer(
      sourceMgr->getMemoryBuffer(buffer)->getBufferStart());
}

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

void Analyzer::readKeys(const KeyGroup &section, ArrayRef<KeyRule> rules,
                        const SectionWording &wording) {
  llvm::MapVector<StringRef, Entries> byKey;
  for (const Entry &entry : section.children)
    byKey[entry.head()].push_back(entry);

  // Keys a typo was taken for: their "missing" error would say it twice.
  llvm::StringSet<> suggested;
  for (auto &[key, entries] : byKey) {
    const KeyRule *rule =
        llvm::find_if(rules, [&](const KeyRule &r) { return r.name == key; });
    if (rule == rules.end()) {
      for (const Entry &entry : entries)
        reportUnknownKey(section, key, entry.keyLoc, rules, wording, suggested);
      continue;
    }

    std::string path = joinPath(section.path, key);
    KeyGroup group{path, entries.front().keyLoc, nullptr, {}};
    const Entry *first = nullptr; // the first entry that sets the key itself
    bool ok = true;
    for (const Entry &entry : entries) {
      if (!entry.setsKey()) {
        if (rule->readGroup) {
          group.children.push_back(entry.tail());
          continue;
        }
        Entry inner = entry.tail();
        diag.error(inner.keyLoc,
                   formatv("'{0}' is a value, not a section; it has no key "
                           "'{1}'",
                           path, inner.head()));
        ok = false;
        continue;
      }
      if (first) {
        auto error = diag.error(
            entry.keyLoc,
            section.path.empty()
                ? formatv("duplicate key '{0}'", key).str()
                : formatv("duplicate key '{0}' in '{1}'", key, section.path)
                      .str());
        error.attachNote(diag.loc(first->value().loc()))
            << "previous value is here";
        continue;
      }
      first = &entry;
      if (rule->readGroup && entry.value().block)
        appendItems(*entry.value().block, group.children);
    }

    if (rule->readGroup) {
      group.value = first ? &first->value() : nullptr;
      rule->readGroup(group);
    } else if (first) {
      plan.locs[path] = first->value().loc();
      if (!readLeaf(*rule, first->value(), path))
        ok = false;
    }
    if (!ok)
      unchecked.insert(path);
  }

  for (const KeyRule &rule : rules) {
    if (rule.need != Need::Required || byKey.count(rule.name))
      continue;
    unchecked.insert(joinPath(section.path, rule.name));
    if (suggested.contains(rule.name))
      continue;
    if (section.path.empty())
      diag.error(section.keyLoc,
                 formatv("missing required section '{0}'", rule.name));
    else
      diag.error(section.keyLoc,
                 formatv("'{0}' is missing required key '{1}'{2}", section.path,
                         rule.name, wording.missingReason));
  }
}

void Analyzer::reportUnknownKey(const KeyGroup &section, StringRef key,
                                SMLoc loc, ArrayRef<KeyRule> rules,
                                const SectionWording &wording,
                                llvm::StringSet<> &suggested) {
  std::string where =
      section.path.empty()
          ? formatv("unknown top-level key '{0}'", key).str()
          : formatv("unknown key '{0}' in '{1}'", key, section.path).str();
  if (wording.unknownKeyReason) {
    std::string reason = wording.unknownKeyReason(key);
    if (!reason.empty()) {
      diag.error(loc, where + "; " + reason);
      return;
    }
  }
  auto names =
      llvm::map_to_vector(rules, [](const KeyRule &r) { return r.name; });
  for (StringRef meant : likelyMeant(key, names))
    suggested.insert(meant);
  diag.error(loc, where + suggestOrList(key, names, "valid keys are"));
}

bool Analyzer::readLeaf(const KeyRule &rule, const Value &value,
                        const std::string &path) {
  if (value.kind == ValueKind::Identifier && value.block) {
    diag.error(value.block->lbrace,
               formatv("'{0}' takes a value, not a block", path));
    return false;
  }
  return rule.readValue(value, path);
}

/// A reader for a section without a value of its own (`train { ... }`).
GroupReader Analyzer::section(std::function<std::vector<KeyRule>()> rules,
                              SectionWording wording) {
  return [this, rules, wording](const KeyGroup &group) {
    plan.locs[group.path] = group.keyLoc;
    if (group.value && group.value->kind != ValueKind::Block) {
      diag.error(group.value->loc(),
                 formatv("'{0}' is a section and expects a block {{ ... }, "
                         "got {1}",
                         group.path, describe(*group.value)));
      unchecked.insert(group.path);
      return;
    }
    readKeys(group, rules(), wording);
  };
}

//===----------------------------------------------------------------------===//
// model
//===----------------------------------------------------------------------===//

/// The keys of each model family, for telling "not a key of this family"
/// from a typo.
static ArrayRef<StringRef> familyOnlyKeys(ModelFamily family) {
  static constexpr StringRef llama[] = {"kv_heads", "rope_theta",
                                        "rope_scaling", "tie_embeddings"};
  static constexpr StringRef bert[] = {"type_vocab", "head", "num_labels"};
  switch (family) {
  case ModelFamily::Llama:
    return llama;
  case ModelFamily::GPT2:
    return {};
  case ModelFamily::Bert:
    return bert;
  }
  llvm_unreachable("unknown family");
}

/// A family's defaults for a model written without a preset. The keys a
/// family requires stay 0.
static ModelSpec familyTemplate(ModelFamily family) {
  ModelSpec spec;
  spec.family = family;
  switch (family) {
  case ModelFamily::Llama:
    break;
  case ModelFamily::GPT2:
    spec.tieEmbeddings = true;
    break;
  case ModelFamily::Bert:
    spec.normEps = 1e-12;
    spec.tieEmbeddings = true;
    break;
  }
  return spec;
}

void Analyzer::readModel(const KeyGroup &group) {
  const Value *v = group.value;
  if (!v) {
    diag.error(group.keyLoc,
               "'model' needs a preset or a family before its keys, e.g. "
               "model = llama3_8b or model = llama { ... }");
    unchecked.insert("model");
    return;
  }
  plan.locs["model"] = v->loc();
  ModelSpec &m = plan.model;
  bool fromPreset = false;
  if (v->kind == ValueKind::Call && v->text == "hf") {
    if (!readHuggingFace(*v)) {
      unchecked.insert("model");
      return;
    }
    fromPreset = true;
  } else if (v->kind != ValueKind::Identifier) {
    diag.error(v->loc(), formatv("'model' expects a preset, a family "
                                 "(llama, gpt2, bert) or hf(\"config.json\"), "
                                 "got {0}",
                                 describe(*v)));
    unchecked.insert("model");
    return;
  } else if (const ModelPreset *preset = lookupModelPreset(v->text)) {
    // `gpt2` names both the family and its smallest preset; as a preset it
    // gives every key a default, which is all a family block would add.
    m = preset->spec;
    m.preset = preset->name.str();
    plan.baseModel = m;
    fromPreset = true;
  } else if (std::optional<ModelFamily> family =
                 symbolizeModelFamily(v->text)) {
    m = familyTemplate(*family);
  } else {
    llvm::SmallVector<StringRef> names;
    for (const ModelPreset &preset : modelPresets())
      names.push_back(preset.name);
    names.append({"llama", "bert"});
    std::string message = formatv("unknown model '{0}'", v->text);
    std::string suggestion = didYouMean(v->text, names);
    if (suggestion.empty()) {
      names.pop_back_n(2);
      suggestion = "; expected a preset (" + llvm::join(names, ", ") +
                   ") or a family (llama, gpt2, bert)";
    }
    diag.error(v->loc(), message + suggestion);
    unchecked.insert("model");
    return;
  }

  ModelFamily family = m.family;
  // A family block gives every key its family has no default for; gpt2
  // derives `intermediate` from `hidden` (applyDerivedDefaults).
  auto need = [&](bool requiredWithoutPreset) {
    return !fromPreset && requiredWithoutPreset ? Need::Required
                                                : Need::Optional;
  };
  std::vector<KeyRule> rules = {
      {"vocab", need(true), integer(m.vocab), nullptr},
      {"hidden", need(true), integer(m.hidden), nullptr},
      {"intermediate", need(family != ModelFamily::GPT2),
       integer(m.intermediate), nullptr},
      {"layers", need(true), integer(m.layers), nullptr},
      {"heads", need(true), integer(m.heads), nullptr},
      {"max_seq_len", need(true), integer(m.maxSeqLen), nullptr},
      {"norm_eps", Need::Optional, real(m.normEps), nullptr},
  };
  if (family == ModelFamily::Llama) {
    rules.push_back({"kv_heads", Need::Optional, integer(m.kvHeads), nullptr});
    rules.push_back({"rope_theta", Need::Optional, real(m.ropeTheta), nullptr});
    rules.push_back({"rope_scaling", Need::Optional,
                     method(&Analyzer::readRopeScaling), nullptr});
    rules.push_back(
        {"tie_embeddings", Need::Optional, boolean(m.tieEmbeddings), nullptr});
  }
  if (family == ModelFamily::Bert) {
    rules.push_back(
        {"type_vocab", Need::Optional, integer(m.typeVocab), nullptr});
    rules.push_back(
        {"head", Need::Optional,
         oneOf<BertHead>(m.bertHead,
                         spellingsOf<BertHead>(getMaxEnumValForBertHead()),
                         "head"),
         nullptr});
    rules.push_back(
        {"num_labels", Need::Optional, integer(m.numLabels), nullptr});
  }

  // LoRA: `lora { ... }` and the storage of its frozen base.
  std::optional<BaseStorage> base;
  rules.push_back({"lora", Need::Optional, nullptr, loraSection(family)});
  rules.push_back(
      {"base", Need::Optional,
       [this, &base](const Value &value, const std::string &path) {
         BaseStorage storage = BaseStorage::F32;
         if (!readEnum<BaseStorage>(
                 value, path,
                 spellingsOf<BaseStorage>(getMaxEnumValForBaseStorage()),
                 "base storage", storage))
           return false;
         base = storage;
         return true;
       },
       nullptr});

  SectionWording wording;
  StringRef familyName = stringify(family);
  wording.missingReason =
      formatv(" (a {0} model without a preset gives every size)", familyName);
  wording.unknownKeyReason = [family, familyName](StringRef key) {
    for (ModelFamily other :
         {ModelFamily::Llama, ModelFamily::GPT2, ModelFamily::Bert})
      if (other != family && llvm::is_contained(familyOnlyKeys(other), key))
        return formatv("it applies to {0} models, and this is a {1} model",
                       stringify(other), familyName)
            .str();
    return std::string();
  };
  readKeys(group, rules, wording);
  finishLora(family, base);
}

GroupReader Analyzer::loraSection(ModelFamily family) {
  return [this, family](const KeyGroup &group) {
    LoraSpec &lora = plan.lora.emplace();
    // PEFT's LoraConfig names are accepted as they are, read apart: each
    // pair is one key, which finishLora settles.
    LoraSpec &peft = loraPeftSpelling;
    std::vector<KeyRule> rules = {
        {"rank", Need::Optional, integer(lora.rank), nullptr},
        {"r", Need::Optional, integer(peft.rank), nullptr},
        {"alpha", Need::Optional, real(lora.alpha), nullptr},
        {"lora_alpha", Need::Optional, real(peft.alpha), nullptr},
        {"dropout", Need::Optional, real(lora.dropout), nullptr},
        {"lora_dropout", Need::Optional, real(peft.dropout), nullptr},
    };
    for (auto [key, targets] : {std::pair{"targets", &lora.targets},
                                std::pair{"target_modules", &peft.targets}})
      rules.push_back(
          {key, Need::Optional,
           [this, family, targets](const Value &v, const std::string &path) {
             return readLoraTargets(v, path, family, *targets);
           },
           nullptr});
    section([rules] { return rules; })(group);
  };
}

/// `all_linear`, or PEFT's own string "all-linear": every linear layer of the
/// blocks.
static bool isAllLinear(const Value &v) {
  return (v.kind == ValueKind::Identifier && !v.block &&
          v.text == "all_linear") ||
         (v.kind == ValueKind::String &&
          (v.text == "all-linear" || v.text == "all_linear"));
}

/// `[q_proj, v_proj]` (names or strings), one name, or `all_linear` (PEFT's
/// "all-linear": every linear layer of the blocks).
bool Analyzer::readLoraTargets(const Value &v, const std::string &path,
                               ModelFamily family,
                               std::vector<std::string> &out) {
  std::vector<std::string> modules = loraModules(family);
  std::vector<const Value *> names;
  if (v.kind == ValueKind::List) {
    for (const syntax::Argument &element : v.elements)
      names.push_back(element.value.get());
    if (names.empty()) {
      diag.error(v.loc(),
                 formatv("'{0}' needs at least one module; leave it out for "
                         "PEFT's default ({1})",
                         path, llvm::join(defaultLoraTargets(family), ", ")));
      return false;
    }
  } else if (isAllLinear(v)) {
    out = modules;
    return true;
  } else {
    names.push_back(&v);
  }

  // Candidates for "did you mean": each module's own name and its dotted
  // name in the block.
  llvm::SmallVector<StringRef> candidates;
  for (const std::string &module : modules) {
    candidates.push_back(module);
    candidates.push_back(StringRef(module).rsplit('.').second);
  }
  llvm::sort(candidates);
  candidates.erase(std::unique(candidates.begin(), candidates.end()),
                   candidates.end());

  bool ok = true;
  std::vector<std::string> targets;
  for (const Value *name : names) {
    if ((name->kind != ValueKind::Identifier &&
         name->kind != ValueKind::String) ||
        name->block) {
      ok = typeError(*name, path,
                     "module names, e.g. [q_proj, v_proj], or all_linear");
      continue;
    }
    if (isAllLinear(*name)) {
      for (const std::string &module : modules)
        if (!llvm::is_contained(targets, module))
          targets.push_back(module);
      continue;
    }
    StringRef target = name->text;
    if (llvm::any_of(modules, [&](const std::string &module) {
          return loraTargetMatches(module, target);
        })) {
      if (!llvm::is_contained(targets, target))
        targets.push_back(target.str());
      continue;
    }
    std::string message = formatv("'{0}' is no linear layer of a {1} block",
                                  target, stringify(family));
    if (target.contains("embed") || target.contains("lm_head") ||
        target.contains("wte") || target.contains("wpe") ||
        target.contains("classifier") || target.contains("cls"))
      message += formatv("; LoRA adapters go on the blocks' linear layers "
                         "only: {0}",
                         llvm::join(modules, ", "));
    else
      message += suggestOrList(target, candidates, "the layers are");
    diag.error(name->loc(), message);
    ok = false;
  }
  if (ok)
    out = std::move(targets);
  return ok;
}

void Analyzer::finishLora(ModelFamily family, std::optional<BaseStorage> base) {
  if (!plan.lora) {
    if (base)
      diag.error(plan.locOf("model.base"),
                 "'model.base' says how the frozen base of a LoRA run is "
                 "stored, and this plan has no 'model.lora': a full "
                 "fine-tune trains every weight");
    return;
  }
  LoraSpec &lora = *plan.lora;
  const LoraSpec &peft = loraPeftSpelling;
  lora.base = base;
  // PEFT's names are the same keys. Given under both names, the one a
  // `--set` gives overrides the file's; two in the file are an error. The
  // name that loses is no longer given (its range is checked under the
  // name that holds the value, Checks.cpp).
  auto fromSet = [&](SMLoc loc) {
    llvm::SourceMgr *sourceMgr = diag.getSourceMgr();
    unsigned id = sourceMgr ? sourceMgr->FindBufferContainingLoc(loc) : 0;
    return id &&
           sourceMgr->getMemoryBuffer(id)->getBufferIdentifier().starts_with(
               "<--set");
  };
  auto settle = [&](const char *ours, const char *peftName, auto field) {
    std::string ourPath = std::string("model.lora.") + ours;
    std::string peftPath = std::string("model.lora.") + peftName;
    bool oursGiven = plan.isGiven(ourPath), peftGiven = plan.isGiven(peftPath);
    if (oursGiven && peftGiven) {
      bool oursSet = fromSet(plan.locOf(ourPath));
      if (oursSet == fromSet(plan.locOf(peftPath))) {
        diag.error(plan.locOf(peftPath),
                   formatv("'{0}' is PEFT's name for '{1}', which is also "
                           "given; give one of them",
                           peftPath, ourPath));
        unchecked.insert(ourPath);
        unchecked.insert(peftPath);
        return;
      }
      plan.locs.erase(oursSet ? peftPath : ourPath);
      peftGiven = !oursSet;
    }
    if (peftGiven)
      lora.*field = peft.*field;
  };
  settle("rank", "r", &LoraSpec::rank);
  settle("alpha", "lora_alpha", &LoraSpec::alpha);
  settle("dropout", "lora_dropout", &LoraSpec::dropout);
  settle("targets", "target_modules", &LoraSpec::targets);
  if (!plan.isGiven("model.lora.targets") &&
      !plan.isGiven("model.lora.target_modules"))
    lora.targets = defaultLoraTargets(family);
}

bool Analyzer::readHuggingFace(const Value &v) {
  if (v.elements.size() != 1 || !v.elements[0].name.empty() ||
      v.elements[0].value->kind != ValueKind::String) {
    diag.error(v.loc(), "hf() takes one string, the path of a config.json or "
                        "of the directory holding it: "
                        "model = hf(\"models/Llama-3.1-8B\")");
    return false;
  }
  llvm::SourceMgr *sourceMgr = diag.getSourceMgr();
  if (!sourceMgr) {
    diag.error(v.loc(), "hf() reads a file, which needs a plan read from "
                        "a file; build the model with ModelBuilder instead");
    return false;
  }
  const Value &path = *v.elements[0].value;
  if (path.text.empty()) {
    diag.error(path.loc(), "hf() needs the path of a config.json or of the "
                           "directory holding it, got \"\"");
    return false;
  }
  std::optional<HuggingFaceModel> model =
      readHuggingFaceModel(*sourceMgr, diag, path.text, path.loc());
  if (!model)
    return false;
  plan.model = model->spec;
  plan.baseModel = model->spec;
  for (const auto &entry : model->keyLocs)
    plan.locs[entry.getKey()] = entry.getValue();
  return true;
}

bool Analyzer::readRopeScaling(const Value &v, const std::string &path) {
  RopeScaling scaling;
  bool scaled = false;
  Form forms[] = {
      {"none", false, {}, [&] { scaled = false; }, ""},
      {"llama3",
       false,
       {{"factor", Need::Optional, real(scaling.factor)},
        {"low_freq_factor", Need::Optional, real(scaling.lowFreqFactor)},
        {"high_freq_factor", Need::Optional, real(scaling.highFreqFactor)},
        {"original_max_seq_len", Need::Optional,
         integer(scaling.originalMaxSeqLen)}},
       [&] { scaled = true; },
       ""},
  };
  bool ok = readForm(v, path, "rope scaling", forms);
  if (scaled)
    plan.model.ropeScaling = scaling;
  else
    plan.model.ropeScaling.reset();
  return ok;
}

//===----------------------------------------------------------------------===//
// cluster
//===----------------------------------------------------------------------===//

void Analyzer::readCluster(const KeyGroup &group) {
  bool fromFile = llvm::any_of(group.children, [](const Entry &e) {
    return e.setsKey() && e.head() == "gpu" &&
           e.value().kind == ValueKind::String;
  });
  section([this, fromFile] { return clusterKeys(fromFile); })(group);
  if (!deviceFile) {
    // The file's error is the error: the node's figures it would have
    // given are not checked as missing or zero.
    if (fromFile)
      for (const char *key : {"cluster.host_memory", "cluster.host_cores",
                              "cluster.host_bandwidth"})
        if (!plan.isGiven(key))
          unchecked.insert(key);
    return;
  }
  const ClusterSpec &c = plan.cluster;
  SMLoc at = plan.locOf("cluster.gpu");
  if (!plan.isGiven("cluster.host_memory"))
    diag.error(group.keyLoc,
               formatv("'cluster' is missing required key 'host_memory' "
                       "(the device file {0} gives no host.memory)",
                       deviceFile->path));
  // The cpu device's figures are a share of the node's cores and memory,
  // which depends on how many ranks share them.
  if (c.device.name == "cpu" && deviceFile->measuredRanksPerNode &&
      !unchecked.count("cluster") &&
      *deviceFile->measuredRanksPerNode != c.gpusPerNode)
    diag.warning(at, formatv("the device file {0} was measured with {1} "
                             "rank(s) a node and the plan runs {2}: the time "
                             "model shares the same cores and memory among "
                             "them, a linear extrapolation; measure again "
                             "with plan-run --calibrate --nproc {2}",
                             deviceFile->path,
                             *deviceFile->measuredRanksPerNode, c.gpusPerNode)
                         .str());
}

std::vector<KeyRule> Analyzer::clusterKeys(bool deviceFile) {
  ClusterSpec &c = plan.cluster;
  return {
      {"nodes", Need::Optional, integer(c.nodes), nullptr},
      {"gpus_per_node", Need::Required, integer(c.gpusPerNode), nullptr},
      {"gpu", Need::Required, nullptr,
       [this](const KeyGroup &g) { readDevice(g); }},
      // A device file may give it (readCluster says when neither does).
      {"host_memory", deviceFile ? Need::Optional : Need::Required,
       size(c.hostMemoryBytes), nullptr},
      {"inter_node_bandwidth", Need::Optional, bandwidth(c.interNodeBandwidth),
       nullptr},
      {"host_bandwidth", Need::Optional, bandwidth(c.hostBandwidth), nullptr},
      {"host_cores", Need::Optional, integer(c.hostCores), nullptr},
  };
}

void Analyzer::readDevice(const KeyGroup &group) {
  DeviceSpec &d = plan.cluster.device;
  const Value *v = group.value;
  bool fromTable = false;
  plan.locs[group.path] = v ? v->loc() : group.keyLoc;
  if (v && v->kind == ValueKind::Identifier) {
    const DeviceSpec *known = lookupDevice(v->text);
    if (!known) {
      auto names = llvm::map_to_vector(
          deviceTable(), [](const DeviceSpec &d) { return StringRef(d.name); });
      diag.error(v->loc(), formatv("unknown device '{0}'", v->text).str() +
                               suggestOrList(v->text, names));
      unchecked.insert(group.path);
      return;
    }
    d = *known;
    fromTable = true;
  } else if (v && v->kind == ValueKind::String) {
    readDeviceFile(*v);
    if (!deviceFile) {
      unchecked.insert(group.path);
      return;
    }
    // The file's figures take overrides as a table device's do.
    fromTable = true;
  } else if (v && v->kind != ValueKind::Block) {
    diag.error(v->loc(),
               formatv("'{0}' expects a device name, a block {{ memory = "
                       "... } or a device file \"FILE.json\", got {1}",
                       group.path, describe(*v)));
    unchecked.insert(group.path);
    return;
  }
  if (!fromTable)
    d = DeviceSpec{.name = "custom"};

  // A device from the table takes overrides; a custom one gives every key.
  Need need = fromTable ? Need::Optional : Need::Required;
  KeyRule rules[] = {
      {"memory", need, size(d.memoryBytes), nullptr},
      {"bf16_tflops", need, real(d.bf16Tflops), nullptr},
      {"fp16_tflops", need, real(d.fp16Tflops), nullptr},
      {"fp32_tflops", need, real(d.fp32Tflops), nullptr},
      {"hbm_bandwidth", need, bandwidth(d.hbmBandwidth), nullptr},
      {"nvlink_bandwidth", need, bandwidth(d.nvlinkBandwidth), nullptr},
      {"pcie_bandwidth", need, bandwidth(d.pcieBandwidth), nullptr},
      // Optional even for a custom device, which keeps the default.
      {"link_latency", Need::Optional, time(d.linkLatency), nullptr},
  };
  SectionWording wording;
  wording.missingReason = " (a device not in the table gives every key)";
  readKeys(group, rules, wording);
}

void Analyzer::readDeviceFile(const Value &v) {
  llvm::SourceMgr *sourceMgr = diag.getSourceMgr();
  if (!sourceMgr) {
    diag.error(v.loc(), "a device file is read beside the plan, which needs "
                        "a plan read from a file");
    return;
  }
  if (v.text.empty()) {
    diag.error(v.loc(), "'cluster.gpu' needs the path of a device file, "
                        "got \"\"");
    return;
  }
  deviceFile = plan::readDeviceFile(*sourceMgr, diag, v.text, v.loc());
  if (!deviceFile)
    return;
  ClusterSpec &c = plan.cluster;
  c.device = deviceFile->device;
  for (const auto &entry : deviceFile->keyLocs)
    if (entry.getKey().starts_with("cluster.gpu."))
      plan.locs[entry.getKey()] = entry.getValue();
  // The node's figures where the plan does not give them: a key of the
  // plan read after this one replaces them, and its location with them.
  auto host = [&](StringRef key, auto &field, const auto &fromFile) {
    if (!fromFile || plan.isGiven(key))
      return;
    field = *fromFile;
    plan.locs[key] = deviceFile->keyLocs.lookup(key);
  };
  host("cluster.host_memory", c.hostMemoryBytes, deviceFile->hostMemoryBytes);
  host("cluster.host_cores", c.hostCores, deviceFile->hostCores);
  host("cluster.host_bandwidth", c.hostBandwidth, deviceFile->hostBandwidth);
}

//===----------------------------------------------------------------------===//
// train
//===----------------------------------------------------------------------===//

std::vector<KeyRule> Analyzer::trainKeys() {
  TrainSpec &t = plan.train;
  return {
      {"optimizer", Need::Required, method(&Analyzer::readOptimizer), nullptr},
      {"micro_batch", Need::Required, integer(t.microBatch), nullptr},
      {"seq_len", Need::Required, integer(t.seqLen), nullptr},
      {"grad_accum", Need::Optional, integer(t.gradAccum), nullptr},
      {"global_batch", Need::Optional, integer(t.globalBatch), nullptr},
      {"precision", Need::Optional,
       oneOf<Precision>(t.precision,
                        spellingsOf<Precision>(getMaxEnumValForPrecision()),
                        "precision"),
       nullptr},
      {"loss_scale", Need::Optional, method(&Analyzer::readLossScale), nullptr},
      {"reduce_dtype", Need::Optional,
       oneOf<DType>(t.reduceDtype, spellingsOf<DType>(getMaxEnumValForDType()),
                    "reduce_dtype"),
       nullptr},
      {"grad_dtype", Need::Optional,
       oneOf<DType>(t.gradDtype, spellingsOf<DType>(getMaxEnumValForDType()),
                    "grad_dtype"),
       nullptr},
      {"activation_checkpointing", Need::Optional,
       oneOf<Checkpointing>(
           t.activationCheckpointing,
           spellingsOf<Checkpointing>(getMaxEnumValForCheckpointing()),
           "activation_checkpointing"),
       nullptr},
      {"grad_clip", Need::Optional, method(&Analyzer::readGradClip), nullptr},
      {"lr_schedule", Need::Optional, method(&Analyzer::readLRSchedule),
       nullptr},
      {"steps", Need::Optional, integer(t.steps), nullptr},
      {"seed", Need::Optional, integer(t.seed), nullptr},
  };
}

bool Analyzer::readOptimizer(const Value &v, const std::string &path) {
  OptimizerSpec &o = plan.train.optimizer;
  auto betas = [this, &o](const Value &v, const std::string &path) {
    int element = 0;
    return readPair(v, path, "(beta1, beta2), e.g. (0.9, 0.999)",
                    [&](const Value &e, const std::string &p) {
                      return readReal(e, p, element++ ? o.beta2 : o.beta1);
                    });
  };
  ValueReader decay = oneOf<WeightDecayScope>(
      o.decay,
      spellingsOf<WeightDecayScope>(getMaxEnumValForWeightDecayScope()),
      "decay");
  Form forms[] = {
      {"adamw",
       true,
       {{"lr", Need::Required, real(o.lr)},
        {"betas", Need::Optional, betas},
        {"eps", Need::Optional, real(o.eps)},
        {"weight_decay", Need::Optional, real(o.weightDecay)},
        {"decay", Need::Optional, decay}},
       [&o] { o.kind = OptimizerKind::AdamW; },
       "adamw(lr = 1e-4)"},
      {"sgd",
       true,
       {{"lr", Need::Required, real(o.lr)},
        {"momentum", Need::Optional, real(o.momentum)},
        {"weight_decay", Need::Optional, real(o.weightDecay)},
        {"decay", Need::Optional, decay}},
       [&o] { o.kind = OptimizerKind::SGD; },
       "sgd(lr = 0.1)"},
  };
  return readForm(v, path, "optimizer", forms);
}

bool Analyzer::readLossScale(const Value &v, const std::string &path) {
  LossScaleSpec &s = plan.train.lossScale;
  Form forms[] = {
      {"none", false, {}, [&s] { s.kind = LossScaleKind::None; }, ""},
      {"dynamic",
       false,
       {{"initial", Need::Optional, real(s.initial)},
        {"growth_interval", Need::Optional, integer(s.growthInterval)}},
       [&s] { s.kind = LossScaleKind::Dynamic; },
       ""},
      {"static",
       true,
       {{"scale", Need::Required, real(s.initial)}},
       [&s] { s.kind = LossScaleKind::Static; },
       "static(1024)"},
  };
  return readForm(v, path, "loss scaling", forms);
}

bool Analyzer::readLRSchedule(const Value &v, const std::string &path) {
  LRScheduleSpec &s = plan.train.lrSchedule;
  auto decaying = [&] {
    return std::vector<Param>{
        {"warmup", Need::Optional, integer(s.warmupSteps)},
        {"min_lr_ratio", Need::Optional, real(s.minLrRatio)}};
  };
  Form forms[] = {
      {"constant",
       false,
       {{"warmup", Need::Optional, integer(s.warmupSteps)}},
       [&s] { s.kind = LRScheduleKind::Constant; },
       ""},
      {"cosine", false, decaying(), [&s] { s.kind = LRScheduleKind::Cosine; },
       ""},
      {"linear", false, decaying(), [&s] { s.kind = LRScheduleKind::Linear; },
       ""},
  };
  return readForm(v, path, "lr schedule", forms);
}

bool Analyzer::readGradClip(const Value &v, const std::string &path) {
  if (v.kind == ValueKind::Identifier && v.text == "none") {
    plan.train.gradClip.reset();
    return true;
  }
  if (v.kind != ValueKind::Number)
    return typeError(v, path, "a number or none");
  double norm = 0;
  if (!readReal(v, path, norm))
    return false;
  plan.train.gradClip = norm;
  return true;
}

//===----------------------------------------------------------------------===//
// parallel
//===----------------------------------------------------------------------===//

std::vector<KeyRule> Analyzer::parallelKeys() {
  ParallelSpec &p = plan.parallel;
  return {
      {"sharding", Need::Optional,
       oneOf<Sharding>(
           p.sharding,
           spellingsOf<Sharding>(getMaxEnumValForSharding(), shardingAliases),
           "sharding"),
       nullptr},
      {"mesh", Need::Optional, method(&Analyzer::readMesh), nullptr},
      {"tensor", Need::Optional, integer(p.tensor), nullptr},
      {"sequence_parallel", Need::Optional, boolean(p.sequenceParallel),
       nullptr},
      {"pipeline", Need::Optional, integer(p.pipeline), nullptr},
      {"schedule", Need::Optional, method(&Analyzer::readPipelineSchedule),
       nullptr},
      {"stages", Need::Optional, method(&Analyzer::readStages), nullptr},
      {"wrap", Need::Optional, method(&Analyzer::readWrap), nullptr},
      {"offload", Need::Optional, nullptr,
       section([this] { return offloadKeys(); })},
      {"optimizer_step", Need::Optional,
       oneOf<MemorySpace>(
           p.optimizerStep,
           spellingsOf<MemorySpace>(getMaxEnumValForMemorySpace(),
                                    memorySpaceAliases),
           "optimizer_step"),
       nullptr},
      {"backward_prefetch", Need::Optional,
       oneOf<Prefetch>(p.backwardPrefetch,
                       spellingsOf<Prefetch>(getMaxEnumValForPrefetch()),
                       "backward_prefetch"),
       nullptr},
      {"forward_prefetch", Need::Optional, boolean(p.forwardPrefetch), nullptr},
      {"max_inflight_gathers", Need::Optional, integer(p.maxInflightGathers),
       nullptr},
      {"bucket", Need::Optional, size(p.bucketBytes), nullptr},
      {"grad_sync", Need::Optional,
       oneOf<GradSync>(p.gradSync,
                       spellingsOf<GradSync>(getMaxEnumValForGradSync()),
                       "grad_sync"),
       nullptr},
  };
}

StringRef plan::foreignParallelKeyMeaning(StringRef key) {
  static const std::pair<StringRef, StringRef> foreign[] = {
      {"sync_module_states",
       "FSDP's sync_module_states does not apply: every rank initialises its "
       "own shards from the same seed, or loads them with plan-run --init, so "
       "there is nothing to broadcast"},
      {"use_orig_params",
       "FSDP's use_orig_params does not apply: the optimizer steps each "
       "group's flat shard, and checkpoints and HF export keep the original "
       "parameter names"},
      {"state_dict_type",
       "FSDP's state_dict_type does not apply: checkpoints are sharded "
       "(plan-run --checkpoint-dir) and plan-checkpoint export writes the full "
       "HF state dict"},
      {"cpu_ram_efficient_loading",
       "Accelerate's cpu_ram_efficient_loading does not apply: with plan-run "
       "--init every rank reads only its own slice of the weights"},
      {"limit_all_gathers",
       "use max_inflight_gathers instead (FSDP's limit_all_gathers = true is "
       "max_inflight_gathers = 2, the default)"},
      {"sharding_strategy", "use sharding instead (FSDP's sharding_strategy)"},
      {"auto_wrap_policy", "use wrap instead (FSDP's auto_wrap_policy)"},
      {"cpu_offload",
       "use offload { params = cpu  grads = cpu  optimizer = cpu } instead "
       "(FSDP's cpu_offload)"},
      {"mixed_precision", "use train.precision instead"},
      {"activation_checkpointing",
       "use train.activation_checkpointing instead"},
      {"tp_degree", "use tensor instead (Accelerate's megatron_lm tp_degree)"},
      {"tensor_model_parallel_size",
       "use tensor instead (Megatron's tensor_model_parallel_size)"},
      {"sequence_parallelism", "use sequence_parallel = true instead"},
      {"pp_degree",
       "use pipeline instead (Accelerate's megatron_lm pp_degree)"},
      {"pipeline_model_parallel_size",
       "use pipeline instead (Megatron's pipeline_model_parallel_size)"},
      {"num_micro_batches",
       "use train.grad_accum instead: a pipeline's micro-batches are the "
       "step's accumulated micro-batches"},
      {"virtual_pipeline_model_parallel_size",
       "use schedule = interleaved(v) instead (Megatron's "
       "virtual_pipeline_model_parallel_size)"},
  };
  for (auto [name, reason] : foreign)
    if (key == name)
      return reason;
  return "";
}

/// FSDP's and Accelerate's settings that a user brings along: what the plan
/// does instead, rather than only "unknown key".
SectionWording Analyzer::parallelWording() {
  SectionWording wording;
  wording.unknownKeyReason = [](StringRef key) {
    return foreignParallelKeyMeaning(key).str();
  };
  return wording;
}

std::vector<KeyRule> Analyzer::offloadKeys() {
  OffloadSpec &o = plan.parallel.offload;
  auto space = [this](MemorySpace &field) {
    return oneOf<MemorySpace>(
        field,
        spellingsOf<MemorySpace>(getMaxEnumValForMemorySpace(),
                                 memorySpaceAliases),
        "memory space");
  };
  return {
      {"params", Need::Optional, space(o.params), nullptr},
      {"grads", Need::Optional, space(o.grads), nullptr},
      {"optimizer", Need::Optional, space(o.optimizer), nullptr},
  };
}

bool Analyzer::readMesh(const Value &v, const std::string &path) {
  ParallelSpec &p = plan.parallel;
  int element = 0;
  return readPair(v, path, "(replicate, shard), e.g. (2, 4)",
                  [&](const Value &e, const std::string &elementPath) {
                    return readInteger(e, elementPath,
                                       element++ ? p.meshShard
                                                 : p.meshReplicate);
                  });
}

bool Analyzer::readPipelineSchedule(const Value &v, const std::string &path) {
  ParallelSpec &p = plan.parallel;
  Form forms[] = {
      {"gpipe",
       false,
       {},
       [&p] {
         p.schedule = PipelineSchedule::GPipe;
         p.virtualStages = 1;
       },
       ""},
      {"1f1b",
       false,
       {},
       [&p] {
         p.schedule = PipelineSchedule::OneFOneB;
         p.virtualStages = 1;
       },
       ""},
      {"interleaved",
       true,
       {{"v", Need::Required, integer(p.virtualStages)}},
       [&p] { p.schedule = PipelineSchedule::Interleaved; },
       "interleaved(2)"},
  };
  return readForm(v, path, "pipeline schedule", forms);
}

/// `balanced`, or each model chunk's transformer blocks: `[9, 8, 8, 7]`.
bool Analyzer::readStages(const Value &v, const std::string &path) {
  ParallelSpec &p = plan.parallel;
  if (v.kind == ValueKind::Identifier && v.text == "balanced" && !v.block) {
    p.stages.clear();
    return true;
  }
  if (v.kind == ValueKind::List && v.elements.empty()) {
    diag.error(v.loc(), formatv("'{0}' needs each stage's transformer blocks, "
                                "e.g. [9, 8, 8, 7]; write balanced (or leave "
                                "it out) to divide them by predicted time",
                                path));
    return false;
  }
  if (v.kind != ValueKind::List)
    return typeError(v, path,
                     "balanced or a list of each stage's transformer blocks, "
                     "e.g. [9, 8, 8, 7]");
  std::vector<int64_t> stages;
  for (const syntax::Argument &element : v.elements) {
    int64_t layers = 0;
    if (!element.value || !readInteger(*element.value, path, layers))
      return false;
    stages.push_back(layers);
  }
  p.stages = std::move(stages);
  return true;
}

bool Analyzer::readWrap(const Value &v, const std::string &path) {
  WrapSpec &w = plan.parallel.wrap;
  Form forms[] = {
      {"transformer_block",
       false,
       {},
       [&w] { w.kind = WrapKind::TransformerBlock; },
       ""},
      {"min_params",
       true,
       {{"n", Need::Required, integer(w.minParams)}},
       [&w] { w.kind = WrapKind::MinParams; },
       "min_params(1e8)"},
      {"whole_model", false, {}, [&w] { w.kind = WrapKind::WholeModel; }, ""},
  };
  return readForm(v, path, "wrap policy", forms);
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

bool Analyzer::typeError(const Value &v, const std::string &path,
                         const llvm::Twine &expected) {
  diag.error(v.loc(), formatv("'{0}' expects {1}, got {2}", path,
                              expected.str(), describe(v)));
  return false;
}

ValueReader Analyzer::method(ReadMethod read) {
  return [this, read](const Value &v, const std::string &path) {
    return (this->*read)(v, path);
  };
}
ValueReader Analyzer::integer(int64_t &field) {
  return [this, &field](const Value &v, const std::string &path) {
    return readInteger(v, path, field);
  };
}
ValueReader Analyzer::real(double &field) {
  return [this, &field](const Value &v, const std::string &path) {
    return readReal(v, path, field);
  };
}
ValueReader Analyzer::boolean(bool &field) {
  return [this, &field](const Value &v, const std::string &path) {
    return readBool(v, path, field);
  };
}
ValueReader Analyzer::size(int64_t &field) {
  return [this, &field](const Value &v, const std::string &path) {
    return readSize(v, path, field);
  };
}
ValueReader Analyzer::bandwidth(double &field) {
  return [this, &field](const Value &v, const std::string &path) {
    return readQuantity(v, path, Quantity::Bandwidth, field);
  };
}
ValueReader Analyzer::time(double &field) {
  return [this, &field](const Value &v, const std::string &path) {
    return readQuantity(v, path, Quantity::Time, field);
  };
}
template <typename E>
ValueReader Analyzer::oneOf(E &field, llvm::SmallVector<Spelling<E>> spellings,
                            StringRef noun) {
  return [this, &field, spellings = std::move(spellings),
          noun](const Value &v, const std::string &path) {
    return readEnum<E>(v, path, spellings, noun, field);
  };
}

/// Integer keys take any whole number, so `min_params(1e8)` reads as written;
/// 1.5 is an error.
bool Analyzer::readInteger(const Value &v, const std::string &path,
                           int64_t &out) {
  if (v.kind != ValueKind::Number)
    return typeError(v, path, "an integer");
  if (!v.unit.empty()) {
    diag.error(v.unitLoc, formatv("'{0}' expects an integer without a unit, "
                                  "got {1}",
                                  path, v.spelling()));
    return false;
  }
  if (v.integer) {
    out = *v.integer;
    return true;
  }
  if (v.isInteger || std::trunc(v.number) == v.number) {
    // 2^63 is the first double past int64_t's range.
    if (!(std::fabs(v.number) < 0x1p63)) {
      diag.error(v.loc(), formatv("'{0}' is out of range: {1} does not fit "
                                  "in a 64-bit integer",
                                  path, v.spelling()));
      return false;
    }
    out = static_cast<int64_t>(v.number);
    return true;
  }
  return typeError(v, path, "an integer");
}

bool Analyzer::readReal(const Value &v, const std::string &path, double &out) {
  if (v.kind != ValueKind::Number)
    return typeError(v, path, "a number");
  if (!v.unit.empty()) {
    diag.error(v.unitLoc, formatv("'{0}' expects a number without a unit, "
                                  "got {1}",
                                  path, v.spelling()));
    return false;
  }
  if (!std::isfinite(v.number)) {
    diag.error(v.loc(),
               formatv("'{0}' is out of range: {1}", path, v.spelling()));
    return false;
  }
  out = v.number;
  return true;
}

bool Analyzer::readBool(const Value &v, const std::string &path, bool &out) {
  if (v.kind != ValueKind::Identifier ||
      (v.text != "true" && v.text != "false"))
    return typeError(v, path, "true or false");
  out = v.text == "true";
  return true;
}

bool Analyzer::readString(const Value &v, const std::string &path,
                          std::string &out) {
  if (v.kind != ValueKind::String)
    return typeError(v, path, "a string");
  out = v.text;
  return true;
}

bool Analyzer::readQuantity(const Value &v, const std::string &path,
                            Quantity quantity, double &out) {
  auto noun = [](Quantity q) -> StringRef {
    switch (q) {
    case Quantity::Size:
      return "a size";
    case Quantity::Bandwidth:
      return "a bandwidth";
    case Quantity::Time:
      return "a time";
    }
    return "";
  };
  StringRef what = noun(quantity);
  if (v.kind != ValueKind::Number)
    return typeError(v, path, what);
  if (v.unit.empty()) {
    StringRef example = quantity == Quantity::Size        ? "GiB"
                        : quantity == Quantity::Bandwidth ? "GB/s"
                                                          : "us";
    diag.error(v.unitLoc, formatv("'{0}' needs {1} unit, e.g. {2}{3}", path,
                                  what, v.spelling(), example));
    return false;
  }
  const Unit *unit = lookupUnit(v.unit);
  if (!unit) {
    llvm::SmallVector<StringRef> names;
    for (const Unit &u : units)
      if (u.quantity == quantity)
        names.push_back(u.name);
    diag.error(v.unitLoc,
               formatv("unknown unit '{0}' in '{1}'", v.unit, path).str() +
                   suggestOrList(v.unit, names));
    return false;
  }
  if (unit->quantity != quantity) {
    diag.error(v.unitLoc, formatv("'{0}' expects {1}, got {2} ({3})", path,
                                  what, noun(unit->quantity), v.spelling()));
    return false;
  }
  out = v.number * unit->factor;
  if (!std::isfinite(out)) {
    diag.error(v.loc(),
               formatv("'{0}' is out of range: {1}", path, v.spelling()));
    return false;
  }
  return true;
}

bool Analyzer::readSize(const Value &v, const std::string &path, int64_t &out) {
  double bytes = 0;
  if (!readQuantity(v, path, Quantity::Size, bytes))
    return false;
  if (!(std::fabs(bytes) < 0x1p63)) {
    diag.error(v.loc(), formatv("'{0}' is out of range: {1} is more bytes "
                                "than fit in a 64-bit integer",
                                path, v.spelling()));
    return false;
  }
  out = static_cast<int64_t>(std::llround(bytes));
  return true;
}

template <typename E>
bool Analyzer::readEnum(const Value &v, const std::string &path,
                        ArrayRef<Spelling<E>> spellings, StringRef noun,
                        E &out) {
  auto names = namesOf(spellings);
  if (v.kind != ValueKind::Identifier)
    return typeError(v, path, "one of " + llvm::join(names, ", "));
  for (const Spelling<E> &spelling : spellings) {
    if (spelling.name == v.text) {
      out = spelling.value;
      return true;
    }
  }
  diag.error(v.loc(), formatv("unknown {0} '{1}'", noun, v.text).str() +
                          suggestOrList(v.text, names));
  return false;
}

bool Analyzer::readPair(const Value &v, const std::string &path,
                        StringRef shape, const ValueReader &element) {
  if (v.kind == ValueKind::List) {
    diag.error(v.loc(), formatv("'{0}' expects a tuple {1}, written with "
                                "parentheses; got a list",
                                path, shape));
    return false;
  }
  if (v.kind != ValueKind::Tuple)
    return typeError(v, path, shape);
  if (v.elements.size() != 2) {
    diag.error(v.loc(), formatv("'{0}' expects two values {1}, got {2}", path,
                                shape, v.elements.size()));
    return false;
  }
  bool ok = true;
  for (const syntax::Argument &e : v.elements)
    ok &= e.value && element(*e.value, path);
  return ok;
}

bool Analyzer::readForm(const Value &v, const std::string &path, StringRef noun,
                        ArrayRef<Form> forms) {
  llvm::SmallVector<StringRef> names;
  std::string spellings;
  for (const Form &form : forms) {
    names.push_back(form.name);
    if (!spellings.empty())
      spellings += ", ";
    spellings += form.name;
    if (!form.params.empty())
      spellings += "(...)";
  }
  if (v.kind != ValueKind::Call && (v.kind != ValueKind::Identifier || v.block))
    return typeError(v, path, "one of " + spellings);
  const Form *form =
      llvm::find_if(forms, [&](const Form &f) { return f.name == v.text; });
  if (form == forms.end()) {
    diag.error(v.loc(), formatv("unknown {0} '{1}'", noun, v.text).str() +
                            suggestOrList(v.text, names));
    return false;
  }
  form->select();
  return readArguments(v, path, *form);
}

bool Analyzer::readArguments(const Value &v, const std::string &path,
                             const Form &form) {
  bool ok = true;
  llvm::SmallVector<const syntax::Argument *, 4> given(form.params.size(),
                                                       nullptr);
  auto paramNames =
      llvm::map_to_vector(form.params, [](const Param &p) { return p.name; });
  if (v.kind == ValueKind::Call) {
    for (auto [i, arg] : llvm::enumerate(v.elements)) {
      // Only a parse that failed (and was reported) leaves an argument empty.
      if (!arg.value) {
        ok = false;
        continue;
      }
      size_t index = 0;
      if (form.params.empty()) {
        diag.error(arg.value->loc(),
                   formatv("'{0}' takes no arguments", form.name));
        ok = false;
        break;
      }
      if (arg.name.empty()) {
        if (i != 0 || !form.leadingPositional) {
          diag.error(arg.value->loc(),
                     form.leadingPositional
                         ? formatv("only the first argument of '{0}' ({1}) "
                                   "may omit its name",
                                   form.name, form.params.front().name)
                               .str()
                         : formatv("the arguments of '{0}' need names: {1}",
                                   form.name, llvm::join(paramNames, ", "))
                               .str());
          ok = false;
          continue;
        }
      } else {
        auto param = llvm::find_if(
            form.params, [&](const Param &p) { return p.name == arg.name; });
        if (param == form.params.end()) {
          diag.error(
              arg.nameLoc,
              formatv("unknown argument '{0}' to '{1}'", arg.name, form.name)
                      .str() +
                  suggestOrList(arg.name, paramNames,
                                formatv("'{0}' takes", form.name).str()));
          ok = false;
          continue;
        }
        index = param - form.params.begin();
      }
      const Param &param = form.params[index];
      SMLoc argLoc = arg.name.empty() ? arg.value->loc() : arg.nameLoc;
      if (given[index]) {
        auto error = diag.error(argLoc, formatv("duplicate argument '{0}' to "
                                                "'{1}'",
                                                param.name, form.name));
        error.attachNote(diag.loc(given[index]->value->loc()))
            << "previous value is here";
        ok = false;
        continue;
      }
      given[index] = &arg;
      std::string argPath = joinPath(path, param.name);
      plan.locs[argPath] = arg.value->loc();
      if (!param.read(*arg.value, argPath)) {
        unchecked.insert(argPath);
        ok = false;
      }
    }
  }
  for (auto [param, arg] : llvm::zip(form.params, given)) {
    if (param.need != Need::Required || arg)
      continue;
    diag.error(v.loc(), formatv("'{0}' is missing required argument '{1}', "
                                "e.g. {2}",
                                form.name, param.name, form.example));
    unchecked.insert(joinPath(path, param.name));
    ok = false;
  }
  return ok;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::optional<PlanSpec> plan::analyzePlan(const syntax::Block &root,
                                          StringRef name, DiagEmitter &diag) {
  return Analyzer(diag, name).run(root);
}

/// The product, or INT64_MAX when it overflows: an out-of-range value the
/// checks then report instead of a wrapped one they would not.
static int64_t saturatingProduct(int64_t a, int64_t b) {
  int64_t product = 0;
  return llvm::MulOverflow(a, b, product) ? INT64_MAX : product;
}

/// The gradient layout a plan gets when nothing lowers it both ways
/// (planc and plan-opt do, and keep the lower peak: report/Lowerings.h).
/// The usual winner per strategy (docs/language.md, "Gradient layout"):
/// DDP holds whole gradients on every rank, and fp32 gradients that the
/// all-reduces run on in place (4 B a parameter) usually beat working-type
/// ones plus the fp32 copies the reductions run on (2 + 4 B), unless
/// activations make the peak; sharded strategies keep a 1/N shard, where
/// working-type shards (2 B, one group's fp32 copy at its step) cost less.
static DType defaultGradDtype(const PlanSpec &plan) {
  if (plan.parallel.sharding == Sharding::NoShard)
    return DType::F32;
  return workingDtype(plan.train.precision);
}

void plan::applyDerivedDefaults(PlanSpec &plan) {
  ModelSpec &m = plan.model;
  switch (m.family) {
  case ModelFamily::Llama:
    // Without grouped-query attention every head has its own key/value head.
    // A preset with GQA keeps its kv_heads when `heads` is overridden.
    if (!plan.isGiven("model.kv_heads")) {
      const ModelPreset *preset = lookupModelPreset(m.preset);
      const ModelSpec *base = plan.baseModel ? &*plan.baseModel
                              : preset       ? &preset->spec
                                             : nullptr;
      bool baseHasGQA = base && base->kvHeads != base->heads;
      m.kvHeads = baseHasGQA ? base->kvHeads : m.heads;
    }
    break;
  case ModelFamily::GPT2:
    // HF GPT2Config: n_inner = null means 4 * n_embd, in every preset too.
    if (!plan.isGiven("model.intermediate"))
      m.intermediate = saturatingProduct(4, m.hidden);
    m.kvHeads = m.heads;
    m.tieEmbeddings = true;
    break;
  case ModelFamily::Bert:
    m.kvHeads = m.heads;
    m.tieEmbeddings = true;
    break;
  }

  ClusterSpec &c = plan.cluster;
  // The NIC share of one GPU on a typical 200 Gb/s-per-GPU InfiniBand fabric.
  if (!plan.isGiven("cluster.inter_node_bandwidth"))
    c.interNodeBandwidth = 25e9;
  // The host of a typical node with this device (docs/language.md).
  HostSpec host = typicalHost(c.device.name);
  if (!plan.isGiven("cluster.host_bandwidth"))
    c.hostBandwidth = host.bandwidth;
  if (!plan.isGiven("cluster.host_cores"))
    c.hostCores = host.cores;

  TrainSpec &t = plan.train;
  // A frozen base not said otherwise is kept in the working type.
  if (plan.lora && !plan.lora->base)
    plan.lora->base = workingStorage(t.precision);
  if (!plan.isGiven("train.loss_scale"))
    t.lossScale = t.precision == Precision::FP16Mixed
                      ? LossScaleSpec{.kind = LossScaleKind::Dynamic}
                      : LossScaleSpec{};

  ParallelSpec &p = plan.parallel;
  if (!plan.isGiven("parallel.optimizer_step"))
    p.optimizerStep = p.offload.optimizer;
  // The data-parallel ranks: the tensor groups split each replica. A degree
  // that does not divide the world is the checker's error.
  int64_t world = saturatingProduct(c.nodes, c.gpusPerNode);
  int64_t dataParallel = p.dataParallelRanks(world);
  if (!plan.isGiven("parallel.mesh"))
    std::tie(p.meshReplicate, p.meshShard) =
        p.defaultMesh(p.sharding, dataParallel, c.gpusPerNode);

  // The accumulation that makes the global batch (every data-parallel rank
  // reads its own micro-batches). One that does not divide is the checker's
  // error.
  if (plan.isGiven("train.global_batch") && !plan.isGiven("train.grad_accum")) {
    int64_t perMicroBatch = saturatingProduct(t.microBatch, dataParallel);
    if (perMicroBatch > 0 && t.globalBatch > 0 &&
        t.globalBatch % perMicroBatch == 0)
      t.gradAccum = t.globalBatch / perMicroBatch;
  }

  if (!plan.isGiven("train.grad_dtype"))
    t.gradDtype = defaultGradDtype(plan);
}
