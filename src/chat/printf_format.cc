// Python printf-style string formatting: `"%s: %d" % (a, b)` and the |format filter.
#include <cmath>
#include <cstdio>

#include "chat/ops.h"
#include "chat/unicode.h"

namespace tachyon::chat {

Result<Value> PercentFormat(const std::string& fmt, const Value& args, size_t max_bytes) {
  std::vector<Value> pos;
  const Value* mapping = nullptr;
  if (args.IsTuple()) {
    pos = args.list().items;
  } else if (args.IsDict()) {
    mapping = &args;
    pos.push_back(args);
  } else {
    pos.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return InvalidArgument("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* v = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) return InvalidArgument("incomplete format key");
      if (!mapping) return InvalidArgument("format requires a mapping");
      const Value* found = mapping->dict().Find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!found) return InvalidArgument("'" + fmt.substr(i + 1, close - i - 1) + "'");
      v = found;
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) {
      flags.push_back(fmt[i++]);
    }
    auto number = [&](int* out) {
      int n = 0, digits = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9') {
        if (++digits > 4) return false;
        n = n * 10 + (fmt[i++] - '0');
      }
      *out = n;
      return true;
    };
    int width = 0, precision = -1;
    if (!number(&width)) return InvalidArgument("format width too large");
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      if (!number(&precision)) return InvalidArgument("format precision too large");
    }
    if (i >= fmt.size()) return InvalidArgument("incomplete format");
    std::string spec = "%" + flags + (width ? std::to_string(width) : "") +
                       (precision >= 0 ? "." + std::to_string(precision) : "");
    char type = fmt[i];
    if (!v) {
      if (next >= pos.size()) return InvalidArgument("not enough arguments for format string");
      v = &pos[next++];
    }
    char buf[10048];
    std::string piece;
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s;
        if (type == 's') {
          ASSIGN_OR_RETURN(s, ToStr(*v, max_bytes));
        } else {
          RETURN_IF_ERROR(AppendRepr(*v, &s, max_bytes));
        }
        if (precision >= 0 && size_t(precision) < s.size()) s = s.substr(0, precision);
        if (s.size() < size_t(width)) {
          std::string pad(size_t(width) - s.size(), ' ');
          s = flags.find('-') != std::string::npos ? s + pad : pad + s;
        }
        piece = s;
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'c': {
        if (!v->IsNumber()) {
          return InvalidArgument(std::string("%") + type +
                                 " format: a real number is required, not " + v->TypeName());
        }
        if (type == 'c') {
          int64_t cp = v->IsFloat() ? -1 : v->AsInt();
          if (cp < 0 || cp > 0x10FFFF) return InvalidArgument("%c arg not in range(0x110000)");
          AppendUtf8(char32_t(cp), &piece);
          break;
        }
        double d = v->AsDouble();
        long long n = v->IsFloat() ? (std::isfinite(d) && std::fabs(d) < 9.2e18 ? (long long)d : 0)
                                   : (long long)v->AsInt();
        char t = type == 'i' || type == 'u' ? 'd' : type;
        std::snprintf(buf, sizeof(buf), (spec + "ll" + t).c_str(), n);
        piece = buf;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        if (!v->IsNumber()) {
          return InvalidArgument(std::string("must be real number, not ") + v->TypeName());
        }
        std::snprintf(buf, sizeof(buf), (spec + type).c_str(), v->AsDouble());
        piece = buf;
        break;
      }
      default:
        return InvalidArgument(std::string("unsupported format character '") + type + "'");
    }
    out += piece;
    if (out.size() > max_bytes) return ResourceExhausted("string exceeds the size limit");
  }
  if (!used_mapping && next < pos.size() && !mapping) {
    return InvalidArgument("not all arguments converted during string formatting");
  }
  return Value(std::move(out));
}

}  // namespace tachyon::chat
