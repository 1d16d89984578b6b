#include "cli/flags.h"

#include <cmath>
#include <cstdio>
#include <exception>

#include "kernels/attention.h"

namespace tachyon::cli {
namespace {

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += sep;
    s += items[i];
  }
  return s;
}

// One line: CLI11 messages may hold newlines.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::unique_ptr<CLI::App> NewCommandApp(const std::string& name, const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, "tachyon " + name);
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->get_formatter()->column_width(36);
  return app;
}

std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // help() shows the subcommand that was given (e.g. `template render --help`).
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ExtrasError& e) {
    // Name an unknown option first (its value, if any, is left over too), else the first
    // stray argument.
    std::vector<std::string> extra = app.remaining(/*recurse=*/true);
    std::string shown = extra.empty() ? std::string(e.what()) : extra.front();
    bool is_option = false;
    for (const std::string& a : extra) {
      if (a.size() > 1 && a[0] == '-' && !ParseNumber(a)) {
        shown = a;
        is_option = true;
        break;
      }
    }
    std::fprintf(stderr, "%s: error: %s '%s' (see --help)\n", app.get_name().c_str(),
                 is_option ? "unknown option" : "unexpected argument", OneLine(shown).c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), OneLine(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", app.get_name().c_str(), OneLine(e.what()).c_str());
    return 2;
  }
  return std::nullopt;
}

std::string FlagDisplayName(std::string_view names) {
  std::string s;
  for (char c : names) {
    if (c == ' ') continue;
    s.push_back(c == ',' ? '/' : c);
  }
  return s;
}

std::optional<double> ParseNumber(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::optional<int64_t> ParseByteSize(std::string_view text) {
  const size_t unit_at = text.find_first_not_of("0123456789.");
  const std::optional<double> number = ParseNumber(text.substr(0, unit_at));
  if (!number || *number <= 0) return std::nullopt;
  const std::string_view unit = unit_at == std::string_view::npos ? "" : text.substr(unit_at);
  double mult = 1;
  if (!unit.empty()) {
    const std::string_view rest = unit.substr(1);
    if (rest != "" && rest != "B" && rest != "iB") return std::nullopt;
    switch (unit[0]) {
      case 'K':
        mult = 1024.0;
        break;
      case 'M':
        mult = 1024.0 * 1024;
        break;
      case 'G':
        mult = 1024.0 * 1024 * 1024;
        break;
      case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        break;
      case 'B':
        if (!rest.empty()) return std::nullopt;
        break;
      default:
        return std::nullopt;
    }
  }
  const double bytes = *number * mult;
  if (bytes < 1 || bytes > 9.0e18) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

CLI::ValidationError BadValue(std::string_view names, std::string_view value,
                              std::string_view what) {
  return CLI::ValidationError(FlagDisplayName(names) + ": '" + std::string(value) + "' is not " +
                              std::string(what));
}

CLI::Option* AddByteSize(CLI::App& app, const std::string& names, int64_t* out, int64_t max_bytes,
                         const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, max_bytes](const std::string& text) {
        const std::optional<int64_t> v = ParseByteSize(text);
        if (!v) throw BadValue(names, text, "a size like 512M or 2G");
        if (*v > max_bytes) {
          throw BadValue(names, text, "at most " + std::to_string(max_bytes) + " bytes");
        }
        *out = *v;
      },
      help);
  opt->type_name("SIZE");
  return opt;
}

CLI::Option* AddSeconds(CLI::App& app, const std::string& names, std::chrono::milliseconds* out,
                        double max_seconds, const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, max_seconds](const std::string& text) {
        const std::optional<double> v = ParseNumber(text);
        if (!v) throw BadValue(names, text, "a number of seconds");
        if (*v < 0 || *v > max_seconds) {
          throw BadValue(names, text, "in [0, " + FormatNumber(max_seconds) + "] seconds");
        }
        *out = std::chrono::milliseconds(static_cast<int64_t>(*v * 1000 + 0.5));
      },
      help);
  opt->type_name("SECONDS")->default_str(FormatNumber(static_cast<double>(out->count()) / 1000));
  return opt;
}

CLI::Option* AddChoice(CLI::App& app, const std::string& names, std::string* out,
                       std::vector<std::string> choices, const std::string& help) {
  const std::string listed = Join(choices, ", ");
  const std::string type = Join(choices, "|");
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, choices = std::move(choices), listed](const std::string& text) {
        for (const std::string& c : choices) {
          if (text == c) {
            *out = text;
            return;
          }
        }
        throw BadValue(names, text, "one of " + listed);
      },
      help);
  opt->type_name(type);
  if (!out->empty()) opt->default_str(*out);
  return opt;
}

CLI::Option* AddChecked(CLI::App& app, const std::string& names, std::string* out,
                        std::function<Status(const std::string&)> check, const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, check = std::move(check)](const std::string& text) {
        if (Status st = check(text); !st.ok()) {
          throw CLI::ValidationError(FlagDisplayName(names) + ": " + st.message());
        }
        *out = text;
      },
      help);
  opt->type_name("TEXT");
  if (!out->empty()) opt->default_str(*out);
  return opt;
}

CLI::Option* AddIntList(CLI::App& app, const std::string& names, std::vector<int>* out, int lo,
                        int hi, const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, lo, hi](const std::string& text) {
        std::vector<int> values;
        size_t start = 0;
        bool ok = !text.empty();
        while (ok) {
          const size_t comma = text.find(',', start);
          const std::string_view item = std::string_view(text).substr(
              start, comma == std::string::npos ? comma : comma - start);
          const std::optional<int> v = ParseInteger<int>(item);
          ok = v && *v >= lo && *v <= hi;
          if (ok) values.push_back(*v);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        if (!ok) {
          throw BadValue(names, text,
                         "a comma-separated list of integers in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "] like 1,4,16");
        }
        *out = std::move(values);
      },
      help);
  opt->type_name("N,N,...");
  return opt;
}

CLI::Option* AddKvDtype(CLI::App& app, const std::string& names, model::KvDtype* out,
                        const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out](const std::string& text) {
        Result<model::KvDtype> dtype = kernels::ParseKvDtype(text);
        if (!dtype.ok()) throw BadValue(names, text, "f16, bf16, q8_0, q4_0, q4_1 or f32");
        *out = *dtype;
      },
      help);
  opt->type_name("f16|bf16|q8_0|q4_0|q4_1|f32")->default_str(kernels::KvDtypeName(*out));
  return opt;
}

}  // namespace tachyon::cli
