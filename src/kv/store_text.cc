// The persistent store's text: declarations in the persistent-memory
// document's syntax (`persistent { step: i32 @init(0); K(l, t): f16[H, Dh]
// @table; }`) and references (`K[l, step]`, `A[0..-3]`, `M[, 2]`).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/format.h"
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
  bool long_name = false;  // the last Ident met a name longer than kMaxPName (p is at it)

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
  // An identifier into out (false when there is none, or when it is
  // longer than kMaxPName: then long_name, and LongName says so).
  bool Ident(char (&out)[kMaxPName + 1]) {
    SkipBlank(false);
    long_name = false;
    if (!IsIdentStart(*p)) return false;
    size_t n = 0;
    while (IsIdent(p[n])) ++n;
    if (n > kMaxPName) {
      long_name = true;
      return false;
    }
    std::memcpy(out, p, n);
    out[n] = '\0';
    p += n;
    return true;
  }
  // The over-long name Ident met, refused by name (owner: the declaration's
  // name, or nullptr before there is one).
  TinyAIStatus LongName(const char* owner) const {
    size_t n = 0;
    while (IsIdent(p[n])) ++n;
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: %s%s%sthe name '%s' %s", line, owner ? "'" : "",
                    owner ? owner : "", owner ? "': " : "", Excerpt(p, n).text, PNameProblem(p));
  }
  // A decimal integer (optionally signed): kNumber, kNone, or kTooLarge for
  // one past int64 (p then stays at it).
  enum NumberKind { kNone, kNumber, kTooLarge };
  NumberKind Integer(int64_t* out) {
    SkipBlank(false);
    const char* s = p;
    if (*s == '-' || *s == '+') ++s;
    if (!IsDigit(*s)) return kNone;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (IsIdent(*end) || (end[0] == '.' && end[1] != '.')) return kNone;
    if (errno == ERANGE) return kTooLarge;
    *out = v;
    p = end;
    return kNumber;
  }
  // The digits at p (after Integer said kTooLarge), for a message.
  PExcerpt Digits() const {
    size_t n = (*p == '-' || *p == '+') ? 1 : 0;
    while (IsDigit(p[n])) ++n;
    return Excerpt(p, n);
  }
  // What is at p, for a message: up to 12 bytes of this line, quoted, or
  // the end of the line or the text.
  PExcerpt Found() const {
    PExcerpt e;
    size_t n = 0;
    while (n < 12 && p[n] != '\0' && p[n] != '\n') ++n;
    if (n == 0) {
      tinyai::Format(e.text, sizeof e.text, "%s", *p == '\0' ? "the end of the text" : "the end of the line");
    } else {
      tinyai::Format(e.text, sizeof e.text, "'%.*s'", static_cast<int>(n), p);
    }
    return e;
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
    // Read exactly (u64 up to 2^64 - 1), then kept as a double: a literal
    // the double does not hold exactly is refused, not rounded.
    errno = 0;
    bool exact = true;
    if (PTypeIsUnsigned(d->dtype) && *start != '-') {
      const unsigned long long v = std::strtoull(start, &end, 10);
      d->init = static_cast<double>(v);
      exact = d->init < 18446744073709551616.0 && static_cast<unsigned long long>(d->init) == v;
    } else {
      const long long v = std::strtoll(start, &end, 10);
      d->init = static_cast<double>(v);
      exact = d->init < 9223372036854775808.0 && static_cast<long long>(d->init) == v;
    }
    if (errno == ERANGE) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(%.*s) is outside %s", c->line, d->name,
                      static_cast<int>(s - start), start, type);
    }
    if (!exact) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @init(%.*s) is not a double, which an @init is "
                      "kept as (integers are exact up to 2^53)", c->line, d->name, static_cast<int>(s - start), start);
    }
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
      if (c->long_name) return c->LongName(d.name);
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': %s expects index names, found %s", c->line, d.name,
                      what, c->Found().text);
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
    if (c->long_name) return c->LongName(nullptr);
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: expected a declaration (NAME: TYPE ...), found %s", c->line,
                    c->Found().text);
  }
  if (c->Eat('(')) TINYAI_RETURN_IF_ERROR(NameList(c, *d, "its index list", d->index_names, &d->index_count));
  if (!c->Eat(':')) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': expected ':' and a type", c->line, d->name);
  char type[kMaxPName + 1] = {};
  if (!c->Ident(type)) {
    if (c->long_name) return c->LongName(d->name);
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': expected a type (f16 f32 f64 i8 i16 i32 i64 u8 u16 u32 "
                    "u64 bool), found %s", c->line, d->name, c->Found().text);
  }
  if (!TypeByName(type, &d->dtype)) {
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
      const Cursor::NumberKind number = c->Integer(&v);
      if (number == Cursor::kNumber) {
        d->shape[d->rank] = v;
      } else if (number == Cursor::kTooLarge) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': dimension %d is %s (at most 2^40)", c->line, d->name,
                        static_cast<int>(d->rank), c->Digits().text);
      } else if (c->Ident(dim)) {
        if (!store.Dim(dim, &v)) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': dimension '%s' is not set (tinyaiSetPersistentDim)",
                          c->line, d->name, dim);
        }
        d->shape[d->rank] = v;
      } else if (c->long_name) {
        return c->LongName(d->name);
      } else {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': a dimension is a number or a name, found %s",
                        c->line, d->name, c->Found().text);
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
    if (!c->Ident(attr)) {
      if (c->long_name) return c->LongName(d->name);
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': '@' without a name", c->line, d->name);
    }
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
        if (!c->Ident(index)) {
          if (c->long_name) return c->LongName(d->name);
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed takes index=number pairs", c->line, d->name);
        }
        if (!c->Eat('=')) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed takes index=number pairs", c->line, d->name);
        }
        const Cursor::NumberKind number = c->Integer(&v);
        if (number == Cursor::kTooLarge) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': @fixed(%s=%s) is outside 1..2^40", c->line,
                          d->name, index, c->Digits().text);
        }
        if (number == Cursor::kNone) {
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
      s = SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: '%s': unexpected %s (a declaration ends with ';' or a "
                   "new line)", c.line, d.name, c.Found().text);
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

// A bound: a decimal integer or a scalar's name (its offset noted); *found
// false for neither. A number past int64 is past every index
// (TINYAI_ERR_OUT_OF_BOUNDS; a negative one: TINYAI_ERR_INVALID_ARGUMENT
// unless it ends a range, counting back), a name past kMaxPName refused by
// name.
TinyAIStatus Bound(Cursor* c, const char* text, int32_t index, bool ends_range, int64_t* value, int64_t* sym,
                   bool* found) {
  *found = true;
  const Cursor::NumberKind number = c->Integer(value);
  if (number == Cursor::kNumber) return TINYAI_OK;
  if (number == Cursor::kTooLarge) {
    const bool negative = *c->p == '-';
    return SetError(negative && !ends_range ? TINYAI_ERR_INVALID_ARGUMENT : TINYAI_ERR_OUT_OF_BOUNDS,
                    "persistent store: '%s': index %d is %s, %s", Excerpt(text).text, static_cast<int>(index),
                    c->Digits().text,
                    negative ? (ends_range ? "counting back past every row" : "negative")
                             : "past every row (an index is below 2^40)");
  }
  c->SkipBlank(false);
  if (!IsIdentStart(*c->p)) {
    *found = false;
    return TINYAI_OK;
  }
  size_t n = 0;
  while (IsIdent(c->p[n])) ++n;
  if (n > kMaxPName) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index %d names '%s', which %s",
                    Excerpt(text).text, static_cast<int>(index), Excerpt(c->p, n).text, PNameProblem(c->p));
  }
  *sym = c->p - text;
  c->p += n;
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus PersistentStore::ParseRef(const char* text, PRef* out) {
  *out = PRef();
  if (text == nullptr) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: the reference is NULL");
  out->text = text;
  Cursor c{text};
  if (!c.Ident(out->name)) {
    if (c.long_name) {
      size_t n = 0;
      while (IsIdent(c.p[n])) ++n;
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: the entry name '%s' %s", Excerpt(c.p, n).text,
                      PNameProblem(c.p));
    }
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s' does not start with an entry's name",
                    Excerpt(text).text);
  }
  if (c.Eat('[')) {
    out->has_brackets = true;
    c.SkipBlank(false);
    if (!c.Eat(']')) {
      for (;;) {
        if (out->count == kMaxPIndices + kMaxPRank) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s' has too many indices", Excerpt(text).text);
        }
        PIndex& ix = out->index[out->count++];
        c.SkipBlank(false);
        if (*c.p == ',' || *c.p == ']') {
          ix.kind = PIndex::kNone;  // `A[r, ]`
        } else {
          const bool open_start = c.p[0] == '.' && c.p[1] == '.';
          const int32_t at = out->count - 1;
          bool found = true;
          if (!open_start) TINYAI_RETURN_IF_ERROR(Bound(&c, text, at, false, &ix.at, &ix.at_sym, &found));
          if (!found) {
            return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index %d is not a number, a name or a "
                            "range a..b", Excerpt(text).text, static_cast<int>(at));
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
            } else {
              TINYAI_RETURN_IF_ERROR(Bound(&c, text, at, true, &ix.to, &ix.to_sym, &found));
              if (!found) {
                return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': a range's end is a number or a "
                                "name", Excerpt(text).text);
              }
              if (ix.to_sym < 0 && ix.to < 0) ix.to_from_end = true;
            }
            if (ix.from_sym < 0 && ix.from < 0) {
              return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': a range starts at 0 or more",
                              Excerpt(text).text);
            }
          } else {
            ix.kind = PIndex::kAt;
            if (ix.at_sym < 0 && ix.at < 0) {
              return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index %lld is negative",
                              Excerpt(text).text, static_cast<long long>(ix.at));
            }
          }
        }
        c.SkipBlank(false);
        if (c.Eat(']')) break;
        if (!c.Eat(',')) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': expected ',' or ']', found %s",
                          Excerpt(text).text, c.Found().text);
        }
      }
    }
    // `A[]` and `A[,]`: all of it.
    bool none = true;
    for (int32_t i = 0; i < out->count; ++i) none &= out->index[i].kind == PIndex::kNone;
    if (none) out->count = 0;
  }
  c.SkipBlank(false);
  if (*c.p != '\0') {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': unexpected %s", Excerpt(text).text,
                    c.Found().text);
  }
  return TINYAI_OK;
}

TinyAIStatus PersistentStore::BindSymbols(PRef* ref) const {
  for (int32_t i = 0; i < ref->count; ++i) {
    PIndex& ix = ref->index[i];
    int64_t* syms[3] = {&ix.at_sym, &ix.from_sym, &ix.to_sym};
    int64_t* values[3] = {&ix.at, &ix.from, &ix.to};
    for (int k = 0; k < 3; ++k) {
      if (*syms[k] < 0) continue;
      // ParseRef took the whole name, at most kMaxPName bytes.
      char name[kMaxPName + 1];
      const char* s = ref->text + *syms[k];
      size_t n = 0;
      while (IsIdent(s[n]) && n < kMaxPName) ++n;
      std::memcpy(name, s, n);
      name[n] = '\0';
      const int32_t e = Find(name);
      if (e < 0 || decl(e).rank != 0 || decl(e).index_count != 0) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "persistent store: '%s': index '%s' names no scalar entry",
                        Excerpt(ref->text).text, name);
      }
      TINYAI_RETURN_IF_ERROR(ScalarIndex(e, ref->text, values[k]));
      *syms[k] = -1;
    }
  }
  return TINYAI_OK;
}

}  // namespace tinyai
