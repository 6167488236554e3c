/// Names the kind of server that sent `bytes` as its first words, for messages when a client
/// reached the wrong service: "an SSH server (it greeted with "SSH-2.0-OpenSSH_9.2")". Pure, so
/// every protocol's client words a wrong port the same way.
public enum ForeignGreeting {
    /// A phrase for the server behind `bytes`, or nil when nothing was received.
    public static func describe(_ bytes: some Collection<UInt8>) -> String? {
        let first = Array(bytes.prefix(64))
        guard !first.isEmpty else { return nil }
        if first.starts(with: Array("SSH-".utf8)) { return "an SSH server (it greeted with \(quoted(first)))" }
        if first.starts(with: Array("RFB ".utf8)) { return "a VNC server (it greeted with \(quoted(first)))" }
        if first.starts(with: Array("HTTP/".utf8)) { return "a web server (it answered \(quoted(first)))" }
        if first.count >= 3, first[0] == 0x15 || first[0] == 0x16, first[1] == 0x03 { return "a server that speaks TLS from the first byte" }
        if first.starts(with: Array("220".utf8)) { return "an FTP or mail server (it greeted with \(quoted(first)))" }
        return "a server that sent \(quoted(first))"
    }

    /// The first line of `bytes` in quotes when it is printable text, else a byte count.
    public static func quoted(_ bytes: [UInt8]) -> String {
        let line = bytes.prefix { $0 != 0x0D && $0 != 0x0A }.prefix(48)
        if !line.isEmpty, line.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return "\"\(String(decoding: line, as: UTF8.self))\"" }
        return "\(bytes.count) bytes of binary data"
    }
}
