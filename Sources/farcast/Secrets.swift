import FarcastSupport
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads secrets the way Farcast promises: from a file, an environment variable, or a prompt on
/// the terminal — never from argv.
enum Secrets {
    /// The first line of a file (trailing CR/LF removed). The file should not be world-readable;
    /// a warning is returned when it is.
    static func readFirstLine(ofFile path: String, what: String = "password file") throws -> (value: String, warning: String?) {
        let data = try readBytes(ofFile: path, what: what)
        var text = String(decoding: data, as: UTF8.self)
        if let newline = text.firstIndex(where: { $0 == "\n" || $0 == "\r" }) { text = String(text[..<newline]) }
        var warning: String?
        if let attributes = try? FileManager.default.attributesOfItem(atPath: path),
           let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            warning = "\(path) is readable by other users (mode \(String(mode, radix: 8))); chmod 600 it"
        }
        return (text, warning)
    }

    /// A file's bytes, or a usage failure (exit 2) that names `what` and the OS's reason.
    private static func readBytes(ofFile path: String, what: String) throws -> Data {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            throw CommandFailure(message: "cannot read the \(what) \(path): \(String(cString: strerror(errno)).lowercased())", exitCode: 2)
        }
        close(fd)
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw CommandFailure(message: "cannot read the \(what) \(path): it is a directory", exitCode: 2)
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure(message: "cannot read the \(what) \(path)", exitCode: 2)
        }
        return data
    }

    /// A whole text file (scripts, configurations), with the OS reason when it cannot be read.
    static func readWhole(ofFile path: String, what: String) throws -> (text: String, bytes: Int) {
        let data = try readBytes(ofFile: path, what: what)
        guard let text = String(data: data, encoding: .utf8) else {
            throw CommandFailure(message: "the \(what) \(path) is not UTF-8 text", exitCode: 2)
        }
        return (text, data.count)
    }

    /// Prompts on the controlling terminal with echo off. Returns nil only when there is no
    /// terminal (end of input gives an empty line).
    static func prompt(_ message: String, echo: Bool = false) -> String? {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        _ = message.withCString { write(fd, $0, strlen($0)) }
        var saved = termios()
        let haveTermios = tcgetattr(fd, &saved) == 0
        if haveTermios && !echo {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if haveTermios && !echo {
                tcsetattr(fd, TCSAFLUSH, &saved)
                _ = write(fd, "\n", 1)
            }
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1 {
            if byte == 0x0A || byte == 0x0D { break }
            line.append(byte)
            if line.count > 4096 { break }
        }
        return String(decoding: line, as: UTF8.self)
    }
}
