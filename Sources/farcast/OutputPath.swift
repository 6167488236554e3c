import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Files a command will write, checked before it connects anywhere (a wrong path is a mistake
/// in the command: exit 2, with the OS reason), and written with the OS reason on failure.
/// "-" means standard output.
enum OutputPath {
    /// Fails unless `path` could be created or overwritten now. Leaves no file behind.
    static func check(_ path: String, what: String) throws {
        guard path != "-" else { return }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue { throw failure(what, path, "it is a directory") }
            let fd = open(path, O_WRONLY | O_APPEND)
            guard fd >= 0 else { throw failure(what, path, osReason()) }
            close(fd)
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else {
            let code = errno
            let folder = (path as NSString).deletingLastPathComponent
            let reason = code == ENOENT && !folder.isEmpty && !FileManager.default.fileExists(atPath: folder)
                ? "the folder \(folder) does not exist" : String(cString: strerror(code)).lowercased()
            throw failure(what, path, reason)
        }
        close(fd)
        unlink(path)
    }

    /// Writes `bytes` to `path` (or standard output for "-").
    static func save(_ bytes: [UInt8], to path: String, what: String) throws {
        if path == "-" {
            FileHandle.standardOutput.write(Data(bytes))
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw CommandFailure(message: "cannot write the \(what) \(path): \(osReason())") }
        defer { close(fd) }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            guard n > 0 else { throw CommandFailure(message: "cannot write the \(what) \(path): \(osReason())") }
            offset += n
        }
    }

    private static func osReason() -> String { String(cString: strerror(errno)).lowercased() }

    private static func failure(_ what: String, _ path: String, _ reason: String) -> CommandFailure {
        CommandFailure(message: "cannot write the \(what) \(path): \(reason)", exitCode: 2)
    }
}

/// The image formats `screenshot` writes, chosen by the file name.
enum ImageFormat: String {
    case png, jpeg

    init(path: String) throws {
        if path == "-" { self = .png; return }
        switch (path as NSString).pathExtension.lowercased() {
        case "png": self = .png
        case "jpg", "jpeg": self = .jpeg
        case "": throw CommandFailure(message: "name the image \(path).png (or .jpg): the extension says which format to write", exitCode: 2)
        case let other: throw CommandFailure(message: "cannot write .\(other) images: name the file .png or .jpg (or use -o - for PNG on standard output)", exitCode: 2)
        }
    }
}
