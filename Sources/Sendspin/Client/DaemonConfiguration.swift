import Foundation

/// The settings of a long-running Sendspin speaker (`farcast sendspin daemon --config PATH`),
/// read from a small text file of `key = value` lines. `#` starts a comment; blank lines are
/// ignored; values may be quoted with double quotes. Every key is optional:
///
///     name = Living Room           # the name servers show
///     output = alsa:default        # alsa:DEVICE, null or wav:PATH
///     output_delay_ms = 40         # the device's extra latency (amplifier, speakers), 0…5000
///     host = 0.0.0.0               # where servers dial (listening, the default mode)
///     port = 8928
///     path = /sendspin
///     server = ws://ma.local:8927/sendspin   # dial this server instead of listening
///     codec = flac                 # preferred codec: pcm, flac or opus
///     suite = chachapoly           # Noise cipher suite: chachapoly or aesgcm
///     pairing_window = yes         # open the static-code pairing window for 5 minutes at start
///     legacy = yes                 # the older unencrypted wire (aiosendspin 5.x servers)
public struct DaemonConfiguration: Sendable, Equatable {
    public var name: String?
    public var output = "null"
    public var outputDelayMs: Int?
    public var host = "0.0.0.0"
    public var port = 8928
    public var path = "/sendspin"
    public var server: String?
    public var codec = "pcm"
    public var suite = "chachapoly"
    public var pairingWindow = false
    /// The older unencrypted wire: spoken to every server that dials when listening; when
    /// dialling `server`, the fallback `play --allow-legacy` makes.
    public var legacy = false

    public init() {}

    /// A line of the file that cannot be used, with its number and what to write instead.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    public static let keys = ["name", "output", "output_delay_ms", "host", "port", "path", "server", "codec", "suite", "pairing_window", "legacy"]

    public init(text: String) throws {
        self.init()
        var seen: Set<String> = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = Self.stripComment(String(raw)).trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw Problem(line: number, message: "expected `key = value`, found \"\(line)\"")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            var value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\"") || value.hasSuffix("\"") {
                guard value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\""), !value.dropFirst().dropLast().contains("\"") else {
                    throw Problem(line: number, message: "unbalanced quotes in \(value): quote the whole value, \"like this\"")
                }
                value = String(value.dropFirst().dropLast())
            }
            guard Self.keys.contains(key) else {
                throw Problem(line: number, message: "unknown key '\(key)' (known: \(Self.keys.joined(separator: ", ")))")
            }
            guard seen.insert(key).inserted else { throw Problem(line: number, message: "'\(key)' is set twice") }
            func integer(_ range: ClosedRange<Int>) throws -> Int {
                guard let n = Int(value), range.contains(n) else {
                    throw Problem(line: number, message: "\(key) must be a whole number in \(range.lowerBound)…\(range.upperBound), found \"\(value)\"")
                }
                return n
            }
            switch key {
            case "name":
                guard !value.isEmpty else { throw Problem(line: number, message: "name must not be empty") }
                name = value
            case "output":
                guard value == "null" || (value.hasPrefix("wav:") && value.count > 4) || (value.hasPrefix("alsa:") && value.count > 5) else {
                    throw Problem(line: number, message: "output must be alsa:DEVICE, null or wav:PATH, found \"\(value)\"")
                }
                output = value
            case "output_delay_ms": outputDelayMs = try integer(0...5000)
            case "host":
                guard !value.isEmpty else { throw Problem(line: number, message: "host must not be empty") }
                host = value
            case "port": port = try integer(0...65535)
            case "path":
                guard value.hasPrefix("/") else { throw Problem(line: number, message: "path must start with /, found \"\(value)\"") }
                path = value
            case "server":
                guard value.hasPrefix("ws://") || value.hasPrefix("wss://") else {
                    throw Problem(line: number, message: "server must be a ws:// URL, found \"\(value)\"")
                }
                server = value
            case "codec":
                guard ["pcm", "flac", "opus"].contains(value) else { throw Problem(line: number, message: "codec must be pcm, flac or opus") }
                codec = value
            case "pairing_window", "legacy":
                let yes: Bool
                switch value.lowercased() {
                case "yes", "true", "on": yes = true
                case "no", "false", "off": yes = false
                default: throw Problem(line: number, message: "\(key) must be yes or no, found \"\(value)\"")
                }
                if key == "legacy" { legacy = yes } else { pairingWindow = yes }
            default:  // suite
                guard ["chachapoly", "aesgcm"].contains(value) else { throw Problem(line: number, message: "suite must be chachapoly or aesgcm") }
                suite = value
            }
        }
    }

    /// Drops a `#` comment that is not inside double quotes.
    private static func stripComment(_ line: String) -> String {
        var quoted = false
        for index in line.indices {
            switch line[index] {
            case "\"": quoted.toggle()
            case "#" where !quoted: return String(line[..<index])
            default: break
            }
        }
        return line
    }
}
