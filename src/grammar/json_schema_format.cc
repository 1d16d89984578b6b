// String formats of the JSON Schema converter: the content grammar of each supported format.
// Each generates only valid values (dates exist: day 29 of February is left out; times and
// date-times as RFC 3339 writes them with 'T' and 'Z' upper case; hostnames of at most 251
// characters), so validators that check formats accept every output.
#include <array>

#include "grammar/json_schema_internal.h"

namespace tachyon::grammar::schema_internal {
namespace {

const char kDate[] =
    "[1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" "
    "[01]) | (\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | \"02-\" (\"0\" "
    "[1-9] | \"1\" [0-9] | \"2\" [0-8]))";
const char kTime[] =
    "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? (\"Z\" | "
    "[-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
const char kEmail[] =
    "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+ (\".\" [a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]+)* \"@\" [a-zA-Z0-9] "
    "([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])? (\".\" [a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])?)+";
const char kUuid[] =
    "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
    "[0-9a-fA-F]{12}";
const char kOctet[] =
    "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9])";
const char kHostLabel[] = "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,60} [a-zA-Z0-9])?";
const char kBase64[] = "([A-Za-z0-9+/]{4})* ([A-Za-z0-9+/]{2} \"==\" | [A-Za-z0-9+/]{3} \"=\")?";
// RFC 3986 pieces.
const char kPchar[] = "([a-zA-Z0-9._~!$&'()*+,;=:@-] | \"%\" [0-9A-Fa-f]{2})";
const char kPcharNoColon[] = "([a-zA-Z0-9._~!$&'()*+,;=@-] | \"%\" [0-9A-Fa-f]{2})";
const char kRegName[] = "([a-zA-Z0-9._~!$&'()*+,;=-] | \"%\" [0-9A-Fa-f]{2})*";
const char kUserinfo[] = "([a-zA-Z0-9._~!$&'()*+,;=:-] | \"%\" [0-9A-Fa-f]{2})*";

std::string Ipv4() {
  std::string o = kOctet;
  return o + " \".\" " + o + " \".\" " + o + " \".\" " + o;
}

std::string Ipv6() {
  const std::string h = "[0-9a-fA-F]{1,4}";
  const std::string ls32 = "(" + h + " \":\" " + h + " | " + Ipv4() + ")";
  auto groups = [&](int n) {  // n times h16 ":"
    if (n == 0) return std::string();
    return "(" + h + " \":\"){" + std::to_string(n) + "} ";
  };
  auto before = [&](int at_most) {  // [ *at_most( h16 ":" ) h16 ]
    if (at_most < 0) return std::string();
    std::string inner =
        at_most == 0 ? h : "(" + h + " \":\"){0," + std::to_string(at_most) + "} " + h;
    return "(" + inner + ")? ";
  };
  std::vector<std::string> alts;
  alts.push_back(groups(6) + ls32);
  alts.push_back("\"::\" " + groups(5) + ls32);
  alts.push_back(before(0) + "\"::\" " + groups(4) + ls32);
  alts.push_back(before(1) + "\"::\" " + groups(3) + ls32);
  alts.push_back(before(2) + "\"::\" " + groups(2) + ls32);
  alts.push_back(before(3) + "\"::\" " + groups(1) + ls32);
  alts.push_back(before(4) + "\"::\" " + ls32);
  alts.push_back(before(5) + "\"::\" " + h);
  alts.push_back(before(6) + "\"::\"");
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// RFC 3339 appendix A.
std::string Duration() {
  const std::string n = "[0-9]+";
  const std::string sec = n + " \"S\"";
  const std::string min = n + " \"M\" (" + sec + ")?";
  const std::string hour = n + " \"H\" (" + min + ")?";
  const std::string time = "\"T\" (" + hour + " | " + min + " | " + sec + ")";
  const std::string day = n + " \"D\"";
  const std::string month = n + " \"M\" (" + day + ")?";
  const std::string year = n + " \"Y\" (" + month + ")?";
  return "\"P\" ((" + day + " | " + month + " | " + year + ") (" + time + ")? | " + time + " | " +
         n + " \"W\")";
}

std::string Hostname() {
  const std::string l = kHostLabel;
  return l + " (\".\" " + l + "){0,3}";
}

std::string Uri(bool reference) {
  const std::string p = kPchar;
  const std::string authority =
      "(" + std::string(kUserinfo) + " \"@\")? " + kRegName + " (\":\" [0-9]{1,5})?";
  const std::string abempty = "(\"/\" " + p + "*)*";
  const std::string tail = "(\"?\" (" + p + " | [/?])*)? (\"#\" (" + p + " | [/?])*)?";
  const std::string hier = "(\"//\" " + authority + " " + abempty + " | \"/\" (" + p + "+ " +
                           abempty + ")? | " + p + "+ " + abempty + ")?";
  const std::string uri = "[a-zA-Z] [a-zA-Z0-9+.-]* \":\" " + hier + " " + tail;
  if (!reference) return uri;
  const std::string relative = "(\"//\" " + authority + " " + abempty + " | \"/\" (" + p + "+ " +
                               abempty + ")? | " + kPcharNoColon + "+ " + abempty + ")? " + tail;
  return "(" + uri + " | " + relative + ")";
}

}  // namespace

Result<std::optional<std::string>> FormatContentExpr(const std::string& format,
                                                     const std::string& where) {
  if (format == "date") return std::optional<std::string>(kDate);
  if (format == "time") return std::optional<std::string>(kTime);
  if (format == "date-time") {
    return std::optional<std::string>(std::string(kDate) + " \"T\" " + kTime);
  }
  if (format == "email") return std::optional<std::string>(kEmail);
  if (format == "uuid") return std::optional<std::string>(kUuid);
  if (format == "ipv4") return std::optional<std::string>(Ipv4());
  if (format == "ipv6") return std::optional<std::string>(Ipv6());
  if (format == "hostname") return std::optional<std::string>(Hostname());
  if (format == "uri") return std::optional<std::string>(Uri(false));
  if (format == "uri-reference") return std::optional<std::string>(Uri(true));
  if (format == "byte") return std::optional<std::string>(kBase64);
  if (format == "duration") return std::optional<std::string>(Duration());
  // Formats that validators check but the converter does not generate.
  static const std::array<const char*, 10> kRefused = {
      "regex",        "iri",          "iri-reference",         "idn-email",
      "idn-hostname", "json-pointer", "relative-json-pointer", "uri-template",
      "color",        "time-duration"};
  for (const char* f : kRefused) {
    if (format == f) return Refuse("format", where, "format '" + format + "' is not supported");
  }
  return std::optional<std::string>();  // unknown to validators: an annotation
}

}  // namespace tachyon::grammar::schema_internal
