// The persistent store's text: declarations in the persistent-memory
// document's syntax (`persistent { step: i32 @init(0); K(l, t): f16[H, Dh]
// @table; }`) and references (`K[l, step]`, `A[0..-3]`, `M[, 2]`).
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/status.h"
#include "kv/store.h"

namespace tinyai {

namespace {

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdent(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A cursor over text that counts lines and skips blanks and comments
// (`//` and `#` to the end of the line). Newlines end declarations, so
// SkipBlank stops at one unless asked to pass it.
struct Cursor {
  const char* p;
  int line = 1;

  void SkipBlank(bool newlines) {
    for (;;) {
      if (*p == ' ' || *p == '\t' || *p == '\r') {
        ++p;
      } else if (*p == '\n' && newlines) {
        ++p;
        ++line;
      } else if ((p[0] == '/' && p[1] == '/') || p[0] == '#') {
        while (*p && *p != '\n') ++p;
      } else {
        return;
      }
    }
  }
  bool Eat(char c) {
    SkipBlank(false);
    if (*p != c) return false;
    ++p;
    return true;
  }
  // An identifier into out (false when there is none or it is too long).
  bool Ident(char (&out)[kMaxPName + 1]) {
    SkipBlank(false);
    if (!IsIdentStart(*p)) return false;
    size_t n = 0;
    while (IsIdent(p[n])) ++n;
    if (n > kMaxPName) return false;
    std::memcpy(out, p, n);
    out[n] = '\0';
    p += n;
    return true;
  }
  // A decimal integer (optionally negative).
  bool Integer(int64_t* out) {
    SkipBlank(false);
    const char* s = p;
    if (*s == '-' || *s == '+') ++s;
    if (!IsDigit(*s)) return false;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (errno == ERANGE || IsIdent(*end) || (end[0] == '.' && end[1] != '.')) return false;
    *out = v;
    p = end;
    return true;
  }
};

bool TypeByName(const char* s, int32_t* out) {
  for (int32_t i = 0; PTypeBytes(i) != 0; ++i) {
    if (std::strcmp(s, PTypeName(i)) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

int32_t IndexOf(const PDecl& d, const char* name) {
  for (int32_t i = 0; i < d.index_count; ++i) {
    if (std::strcmp(d.index_names[i], name) == 0) return i;
  }
  return -1;
}

// `@init(...)`'s literal: the document's rule - a float type takes a float
// literal (a '.' or an exponent), an integer type (and bool) an integer one.
TinyAIStatus InitLiteral(Cursor* c, PDecl* d) {
  c->SkipBlank(false);
  const char* start = c->p;
  const char* s = start;
  if (*s == '-' || *s == '+') ++s;
  bool is_float = false, digits = false;
  while (IsDigit(*s) || *s == '.' || *s == 'e' || *s == 'E' ||
         ((*s == '-' || *s == '+') && (s[-1] == 'e' || s[-1] == 'E'))) {
    digits |= IsDigit(*s);
    is_float |= *s == '.' || *s == 'e' || *s == 'E';
    ++s;
  }
  if (d->dtype == TINYAI_PTYPE_BOOL && !digits && (std::strncmp(start, "true", 4) == 0 || std::strncmp(start, "false", 5) == 0)) {
    d->init = start[0] == 't' ? 1.0 : 0.0;
    c->p = start + (start[0] == 't' ? 4 : 5);
    d->has_init = true;
    return TINYAI_OK;
  }
  if (!digits || IsIdent(*s)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init takes a number", c->line, d->name);
  }
  const bool wants_float = PTypeIsFloat(d->dtype);
  const char* type = PTypeName(d->dtype);
  if (wants_float && !is_float) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(%.*s) is an integer literal; %s takes a float "
                    "literal (%.*s.0)", c->line, d->name, static_cast<int>(s - start), start, type,
                    static_cast<int>(s - start), start);
  }
  if (!wants_float && is_float) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(%.*s) is a float literal; %s takes an integer "
                    "literal", c->line, d->name, static_cast<int>(s - start), start, type);
  }
  char* end = nullptr;
  if (wants_float) {
    d->init = std::strtod(start, &end);
  } else {
    errno = 0;
    const long long v = std::strtoll(start, &end, 10);
    if (errno == ERANGE) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(%.*s) is outside %s", c->line, d->name,
                      static_cast<int>(s - start), start, type);
    }
    d->init = static_cast<double>(v);
  }
  if (end != s || !std::isfinite(d->init)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(%.*s) is not a number", c->line, d->name,
                    static_cast<int>(s - start), start);
  }
  c->p = s;
  d->has_init = true;
  return TINYAI_OK;
}

// A comma-separated list of names in parentheses, after the '('.
TinyAIStatus NameList(Cursor* c, const PDecl& d, const char* what, char (*names)[kMaxPName + 1], int32_t* count) {
  *count = 0;
  if (c->Eat(')')) return TINYAI_OK;
  for (;;) {
    if (*count == kMaxPIndices) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': %s lists more than %d indices", c->line, d.name, what,
                      kMaxPIndices);
    }
    if (!c->Ident(names[*count])) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': %s expects index names", c->line, d.name, what);
    }
    ++*count;
    if (c->Eat(')')) return TINYAI_OK;
    if (!c->Eat(',')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': %s expects ',' or ')'", c->line, d.name, what);
  }
}

}  // namespace

// One declaration: NAME[(indices)]: TYPE[[dims]] attributes.
static TinyAIStatus ParseDecl(Cursor* c, const PersistentStore& store, PDecl* d) {
  if (!c->Ident(d->name)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: expected a declaration (NAME: TYPE ...), found '%.12s'",
                    c->line, c->p);
  }
  if (c->Eat('(')) TINYAI_RETURN_IF_ERROR(NameList(c, *d, "its index list", d->index_names, &d->index_count));
  if (!c->Eat(':')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': expected ':' and a type", c->line, d->name);
  char type[kMaxPName + 1];
  if (!c->Ident(type) || !TypeByName(type, &d->dtype)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': '%s' is not a type (f16 f32 f64 i8 i16 i32 i64 u8 u16 "
                    "u32 u64 bool)", c->line, d->name, type);
  }
  d->rank = 0;
  if (c->Eat('[')) {
    for (;;) {
      if (d->rank == kMaxPRank) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': more than %d dimensions", c->line, d->name, kMaxPRank);
      }
      int64_t v = 0;
      char dim[kMaxPName + 1];
      if (c->Integer(&v)) {
        d->shape[d->rank] = v;
      } else if (c->Ident(dim)) {
        if (!store.Dim(dim, &v)) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': dimension '%s' is not set (tinyaiSetPersistentDim)",
                          c->line, d->name, dim);
        }
        d->shape[d->rank] = v;
      } else {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': a dimension is a number or a name", c->line, d->name);
      }
      ++d->rank;
      if (c->Eat(']')) break;
      if (!c->Eat(',')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': expected ',' or ']'", c->line, d->name);
    }
  }
  bool table = false;
  char autos[kMaxPIndices][kMaxPName + 1];
  int32_t auto_count = 0;
  while (c->Eat('@')) {
    char attr[kMaxPName + 1];
    if (!c->Ident(attr)) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': '@' without a name", c->line, d->name);
    if (std::strcmp(attr, "table") == 0) {
      table = true;
    } else if (std::strcmp(attr, "init") == 0) {
      if (!c->Eat('(')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(...)", c->line, d->name);
      TINYAI_RETURN_IF_ERROR(InitLiteral(c, d));
      if (!c->Eat(')')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init takes one literal", c->line, d->name);
    } else if (std::strcmp(attr, "fixed") == 0) {
      if (!c->Eat('(')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed(i=N, ...)", c->line, d->name);
      for (;;) {
        char index[kMaxPName + 1];
        int64_t v = 0;
        if (!c->Ident(index) || !c->Eat('=') || !c->Integer(&v)) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed takes index=number pairs", c->line, d->name);
        }
        const int32_t i = IndexOf(*d, index);
        if (i < 0) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed names '%s', which is not one of its indices",
                          c->line, d->name, index);
        }
        if (v < 1) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed(%s=%lld): an extent is at least 1", c->line,
                          d->name, index, static_cast<long long>(v));
        }
        d->fixed[i] = v;
        if (c->Eat(')')) break;
        if (!c->Eat(',')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed expects ',' or ')'", c->line, d->name);
      }
    } else if (std::strcmp(attr, "auto_dim") == 0) {
      if (!c->Eat('(')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @auto_dim(i, ...)", c->line, d->name);
      TINYAI_RETURN_IF_ERROR(NameList(c, *d, "@auto_dim", autos, &auto_count));
    } else {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': unknown attribute @%s (@init, @table, @fixed, "
                      "@auto_dim)", c->line, d->name, attr);
    }
  }
  // The auto dims are the last indices, in order: C(l, i, j) @auto_dim(i, j).
  for (int32_t k = 0; k < auto_count; ++k) {
    const int32_t want = d->index_count - auto_count + k;
    if (want < 0 || IndexOf(*d, autos[k]) != want) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @auto_dim's indices are its last ones, in order ('%s')",
                      c->line, d->name, autos[k]);
    }
  }
  d->auto_count = auto_count;
  if (d->index_count > 0 && !table && auto_count == 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s' has indices: it is a @table or an @auto_dim matrix",
                    c->line, d->name);
  }
  if (table && d->index_count == auto_count) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': a @table needs indices of its own ('%s(i): ...')",
                    c->line, d->name, d->name);
  }
  if (!table && d->index_count > auto_count) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': indices besides @auto_dim's make it a @table", c->line,
                    d->name);
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::DeclareText(const char* text) {
  if (text == nullptr) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDeclarePersistent: text is NULL");
  const int32_t before = count();
  Cursor c{text};
  bool block = false;
  c.SkipBlank(true);
  const char* save = c.p;
  char word[kMaxPName + 1];
  if (c.Ident(word) && std::strcmp(word, "persistent") == 0) {
    c.SkipBlank(true);
    if (*c.p != '{') return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: 'persistent' opens a block: '{'", c.line);
    ++c.p;
    block = true;
  } else {
    c.p = save;
  }
  TinyAIStatus s = TINYAI_OK;
  for (;;) {
    c.SkipBlank(true);
    while (*c.p == ';') {
      ++c.p;
      c.SkipBlank(true);
    }
    if (*c.p == '\0') {
      if (block) s = SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: the persistent block has no closing '}'", c.line);
      break;
    }
    if (*c.p == '}') {
      if (!block) {
        s = SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '}' without 'persistent {'", c.line);
        break;
      }
      ++c.p;
      c.SkipBlank(true);
      if (*c.p != '\0') s = SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: text after the persistent block", c.line);
      break;
    }
    PDecl d;
    if ((s = ParseDecl(&c, *this, &d)) != TINYAI_OK) break;
    c.SkipBlank(false);
    if (*c.p != ';' && *c.p != '\n' && *c.p != '}' && *c.p != '\0') {
      s = SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': unexpected '%.12s' (a declaration ends with ';' or a "
                   "new line)", c.line, d.name, c.p);
      break;
    }
    if ((s = Declare(d)) != TINYAI_OK) {
      s = AddErrorContext(s, "line %d: ", c.line);  // Declare's message names the entry
      break;
    }
  }
  if (s != TINYAI_OK) {
    const TinyAIStatus kept = s;
    Truncate(before);
    return kept;
  }
  return TINYAI_OK;
}

// ---- references ---------------------------------------------------------------------------------

namespace {

// A bound: a decimal integer or a scalar's name (its offset noted).
bool Bound(Cursor* c, const char* text, int64_t* value, int32_t* sym) {
  if (c->Integer(value)) return true;
  c->SkipBlank(false);
  if (!IsIdentStart(*c->p)) return false;
  *sym = static_cast<int32_t>(c->p - text);
  while (IsIdent(*c->p)) ++c->p;
  return true;
}

}  // namespace

TinyAIStatus PersistentStore::ParseRef(const char* text, PRef* out) {
  *out = PRef();
  if (text == nullptr) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: the reference is NULL");
  out->text = text;
  Cursor c{text};
  if (!c.Ident(out->name)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s' does not start with an entry's name", text);
  }
  if (c.Eat('[')) {
    out->has_brackets = true;
    c.SkipBlank(false);
    if (!c.Eat(']')) {
      for (;;) {
        if (out->count == kMaxPIndices + kMaxPRank) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s' has too many indices", text);
        }
        PIndex& ix = out->index[out->count++];
        c.SkipBlank(false);
        if (*c.p == ',' || *c.p == ']') {
          ix.kind = PIndex::kNone;  // `A[r, ]`
        } else {
          const bool open_start = c.p[0] == '.' && c.p[1] == '.';
          if (!open_start && !Bound(&c, text, &ix.at, &ix.at_sym)) {
            return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index %d is not a number, a name or a "
                            "range a..b", text, static_cast<int>(out->count - 1));
          }
          c.SkipBlank(false);
          if (c.p[0] == '.' && c.p[1] == '.') {
            c.p += 2;
            ix.kind = PIndex::kRange;
            ix.from = open_start ? 0 : ix.at;
            ix.from_sym = open_start ? -1 : ix.at_sym;
            ix.at_sym = -1;
            c.SkipBlank(false);
            if (*c.p == ',' || *c.p == ']') {  // `a..`: to the end
              ix.to = 0;
              ix.to_from_end = true;
            } else if (!Bound(&c, text, &ix.to, &ix.to_sym)) {
              return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': a range's end is a number or a name",
                              text);
            } else if (ix.to_sym < 0 && ix.to < 0) {
              ix.to_from_end = true;
            }
            if (ix.from_sym < 0 && ix.from < 0) {
              return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': a range starts at 0 or more", text);
            }
          } else {
            ix.kind = PIndex::kAt;
            if (ix.at_sym < 0 && ix.at < 0) {
              return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index %lld is negative", text,
                              static_cast<long long>(ix.at));
            }
          }
        }
        c.SkipBlank(false);
        if (c.Eat(']')) break;
        if (!c.Eat(',')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': expected ',' or ']'", text);
      }
    }
    // `A[]` and `A[,]`: all of it.
    bool none = true;
    for (int32_t i = 0; i < out->count; ++i) none &= out->index[i].kind == PIndex::kNone;
    if (none) out->count = 0;
  }
  c.SkipBlank(false);
  if (*c.p != '\0') return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': unexpected '%s'", text, c.p);
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::BindSymbols(PRef* ref) const {
  for (int32_t i = 0; i < ref->count; ++i) {
    PIndex& ix = ref->index[i];
    int32_t* syms[3] = {&ix.at_sym, &ix.from_sym, &ix.to_sym};
    int64_t* values[3] = {&ix.at, &ix.from, &ix.to};
    for (int k = 0; k < 3; ++k) {
      if (*syms[k] < 0) continue;
      char name[kMaxPName + 1];
      const char* s = ref->text + *syms[k];
      size_t n = 0;
      while (IsIdent(s[n]) && n < kMaxPName) ++n;
      std::memcpy(name, s, n);
      name[n] = '\0';
      const int32_t e = Find(name);
      if (e < 0 || decl(e).rank != 0 || decl(e).index_count != 0) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index '%s' names no scalar entry",
                        ref->text, name);
      }
      double v = 0;
      TINYAI_RETURN_IF_ERROR(ScalarValue(e, &v));
      if (v < 0 || v != std::floor(v) || v > 9.0e15) {
        return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "persistent store: '%s': index '%s' is %g, not a row number", ref->text,
                        name, v);
      }
      *values[k] = static_cast<int64_t>(v);
      *syms[k] = -1;
    }
  }
  return TINYAI_OK;
}

}  // namespace tinyai
