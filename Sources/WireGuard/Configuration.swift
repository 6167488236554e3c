import Foundation
import Tunnel

/// A wg-quick configuration file: one `[Interface]` and any number of `[Peer]` sections of
/// `Key = Value` lines (keys in any case, `#` comments). What farcast does not apply (DNS,
/// routing tables, hook commands) is listed in `ignored` so the caller can say so; anything it
/// cannot read is a `WireGuardConfigurationError` with its line.
public struct WireGuardConfiguration: Sendable {
    public struct Peer: Sendable {
        public var publicKey: PublicKey
        public var presharedKey: PresharedKey = .none
        public var allowedIPs: [IPPrefix] = []
        /// `host:port` as written (a name is resolved when the interface comes up).
        public var endpoint: String?
        public var persistentKeepalive: Duration?
        /// The line of its `[Peer]` header (for messages).
        public var line: Int
    }

    public var privateKey: PrivateKey
    public var addresses: [IPPrefix] = []
    public var listenPort: UInt16?
    public var mtu: Int?
    public var peers: [Peer] = []
    /// Settings read but not applied, as "Key (line N)".
    public var ignored: [String] = []

    public init(parsing text: String) throws(WireGuardConfigurationError) {
        enum Section { case none, interface, peer }
        var section = Section.none
        var privateKey: PrivateKey?
        var peer: (line: Int, fields: [String: (String, Int)])?
        var parsedPeers: [Peer] = []
        var addresses: [IPPrefix] = []
        var listenPort: UInt16?
        var mtu: Int?
        var ignored: [String] = []

        func finishPeer(_ pending: (line: Int, fields: [String: (String, Int)])) throws(WireGuardConfigurationError) -> Peer {
            guard let (keyText, keyLine) = pending.fields["publickey"] else {
                throw WireGuardConfigurationError(line: pending.line, message: "this [Peer] has no PublicKey")
            }
            var result: Peer
            do { result = Peer(publicKey: try PublicKey(base64: keyText), line: pending.line) }
            catch { throw WireGuardConfigurationError(line: keyLine, message: "\(error)") }
            if let (text, line) = pending.fields["presharedkey"] {
                do { result.presharedKey = try PresharedKey(base64: text) }
                catch { throw WireGuardConfigurationError(line: line, message: "\(error)") }
            }
            if let (text, line) = pending.fields["allowedips"] {
                result.allowedIPs = try Self.prefixes(text, line: line, what: "AllowedIPs")
            }
            if let (text, line) = pending.fields["endpoint"] {
                guard Self.splitEndpoint(text) != nil else {
                    throw WireGuardConfigurationError(line: line, message: "Endpoint '\(text)' is not HOST:PORT (an IPv6 address in brackets: [fd00::1]:51820)")
                }
                result.endpoint = text
            }
            if let (text, line) = pending.fields["persistentkeepalive"] {
                if text.lowercased() != "off" {
                    guard let seconds = Int(text), (0...65535).contains(seconds) else {
                        throw WireGuardConfigurationError(line: line, message: "PersistentKeepalive must be off or 0–65535 seconds, not '\(text)'")
                    }
                    result.persistentKeepalive = seconds == 0 ? nil : .seconds(seconds)
                }
            }
            return result
        }

        for (offset, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init)?
                .trimmingCharacters(in: .whitespaces) ?? ""
            if line.isEmpty { continue }
            if line.hasPrefix("[") {
                if let pending = peer { parsedPeers.append(try finishPeer(pending)); peer = nil }
                switch line.lowercased() {
                case "[interface]":
                    guard section == .none else { throw WireGuardConfigurationError(line: number, message: "a second [Interface] section") }
                    section = .interface
                case "[peer]":
                    section = .peer
                    peer = (number, [:])
                default:
                    throw WireGuardConfigurationError(line: number, message: "unknown section \(line) (expected [Interface] or [Peer])")
                }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw WireGuardConfigurationError(line: number, message: "expected Key = Value, got '\(line)'")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            let lower = key.lowercased()
            switch section {
            case .none:
                throw WireGuardConfigurationError(line: number, message: "\(key) before any [Interface] or [Peer] section")
            case .interface:
                switch lower {
                case "privatekey":
                    do { privateKey = try PrivateKey(base64: value) }
                    catch { throw WireGuardConfigurationError(line: number, message: "\(error)") }
                case "address":
                    addresses += try Self.prefixes(value, line: number, what: "Address")
                case "listenport":
                    guard let port = UInt16(value) else {
                        throw WireGuardConfigurationError(line: number, message: "ListenPort must be 0–65535, not '\(value)'")
                    }
                    listenPort = port
                case "mtu":
                    guard let bytes = Int(value), (576...65535).contains(bytes) else {
                        throw WireGuardConfigurationError(line: number, message: "MTU must be 576–65535, not '\(value)'")
                    }
                    mtu = bytes
                case "dns", "table", "preup", "postup", "predown", "postdown", "saveconfig", "fwmark":
                    ignored.append("\(key) (line \(number))")
                default:
                    throw WireGuardConfigurationError(line: number, message: "unknown [Interface] setting \(key)")
                }
            case .peer:
                guard ["publickey", "presharedkey", "allowedips", "endpoint", "persistentkeepalive"].contains(lower) else {
                    throw WireGuardConfigurationError(line: number, message: "unknown [Peer] setting \(key)")
                }
                if lower == "allowedips", let existing = peer?.fields[lower] {
                    peer?.fields[lower] = (existing.0 + "," + value, existing.1)   // AllowedIPs may repeat
                } else {
                    peer?.fields[lower] = (value, number)
                }
            }
        }
        if let pending = peer { parsedPeers.append(try finishPeer(pending)) }
        guard let privateKey else { throw WireGuardConfigurationError(line: 0, message: "no PrivateKey in [Interface]") }
        var seen: [PublicKey: Int] = [:]
        for peer in parsedPeers {
            if let first = seen[peer.publicKey] {
                throw WireGuardConfigurationError(line: peer.line, message: "the same PublicKey as the [Peer] on line \(first)")
            }
            seen[peer.publicKey] = peer.line
        }
        self.privateKey = privateKey
        self.addresses = addresses
        self.listenPort = listenPort
        self.mtu = mtu
        self.peers = parsedPeers
        self.ignored = ignored
    }

    private static func prefixes(_ text: String, line: Int, what: String) throws(WireGuardConfigurationError) -> [IPPrefix] {
        var result: [IPPrefix] = []
        for item in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !item.isEmpty {
            let withLength = item.contains("/") ? item : item + (item.contains(":") ? "/128" : "/32")
            do { result.append(try IPPrefix(withLength)) }
            catch { throw WireGuardConfigurationError(line: line, message: "\(what): \(error)") }
        }
        return result
    }

    /// `host:port` or `[v6]:port` split, or nil.
    public static func splitEndpoint(_ text: String) -> (host: String, port: UInt16)? {
        UDPEndpoint.split(text)
    }
}

public struct WireGuardConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// 1-based; 0 for the file as a whole.
    public let line: Int
    public let message: String
    public var description: String { line > 0 ? "line \(line): \(message)" : message }
}
