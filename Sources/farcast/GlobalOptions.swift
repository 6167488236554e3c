import ArgumentParser
import FarcastNIO
import FarcastSupport
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Options every leaf command accepts.
struct GlobalOptions: ParsableArguments {
    @Flag(name: [.short, .long], help: "Log protocol detail to stderr (repeat for trace level).")
    var verbose: Int

    @Flag(name: [.short, .long], help: "Log only errors.")
    var quiet = false

    @Flag(help: "Print machine-readable JSON on stdout instead of text.")
    var json = false

    func validate() throws {
        if quiet && verbose > 0 { throw ValidationError("--quiet and --verbose contradict each other") }
    }

    /// `quietest`: the level without --verbose (a daemon logs its sessions at info).
    func logLevel(default quietest: Logger.Level = .notice) -> Logger.Level {
        if quiet { return .error }
        switch verbose {
        case 0: return quietest
        case 1: return .debug
        default: return .trace
        }
    }

    /// Sends swift-log output to stderr at the chosen level and returns a logger for `label`.
    /// Call once per process (from the leaf command's `run`).
    func makeLogger(label: String, defaultLevel: Logger.Level = .notice) -> Logger {
        let level = logLevel(default: defaultLevel)
        LoggingSystem.bootstrap { name in
            var handler = StreamLogHandler.standardError(label: name)
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }
}

/// A failure the user should see as one line, with the exit code to leave with (docs/cli.md:
/// 1 for a failure at run time, 2 for a mistake in the command line or a configuration file).
struct CommandFailure: Error, CustomStringConvertible {
    var message: String
    var exitCode: Int32 = 1
    var description: String { message }
}

/// Runs a leaf command's body. Failures become `CommandFailure`s worded for a person (one line,
/// the cause, the OS reason where there is one); `Farcast.main` prints them and exits with their
/// code. Usage mistakes (`ValidationError`) and interruptions pass through unchanged. The SSH
/// routes the command kept open end with it, however it ends (an OpenSSH master is told
/// `-O exit` and waited for), so nothing it started is still running when it returns.
func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
        await HostOptions.closeOpenRoutes()
    } catch {
        await HostOptions.closeOpenRoutes()
        switch error {
        case is ExitCode, is CleanExit, is ValidationError, is CommandFailure, is CancellationError:
            throw error
        default:
            // Whatever a signal cut short reports it its own way; the policy words it once.
            if Signals.received != nil { throw CancellationError() }
            throw CommandFailure(message: describe(error))
        }
    }
}

/// Any error as one line a person can act on: our own errors are worded already; Foundation's
/// file errors become the OS reason and the path; network errors go through `describeNetworkError`.
func describe(_ error: any Error) -> String {
    switch error {
    case let failure as CommandFailure: return failure.message
    case is CancellationError: return "interrupted"
    case let decoding as DecodingError: return "malformed JSON: \(describe(decoding))"
    default: break
    }
    let nsError = error as NSError
    if nsError.domain == NSCocoaErrorDomain || nsError.domain == NSPOSIXErrorDomain {
        let path = (nsError.userInfo[NSFilePathErrorKey] as? String).map { "\($0): " } ?? ""
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return path + String(cString: strerror(Int32(underlying.code))).lowercased()
        }
        if nsError.domain == NSPOSIXErrorDomain { return path + String(cString: strerror(Int32(nsError.code))).lowercased() }
        switch CocoaError.Code(rawValue: nsError.code) {
        case .fileReadNoSuchFile, .fileNoSuchFile: return path + "no such file or directory"
        case .fileReadNoPermission, .fileWriteNoPermission: return path + "permission denied"
        case .fileReadInapplicableStringEncoding, .fileReadCorruptFile: return path + "not UTF-8 text"
        default: break
        }
    }
    // Our library errors are CustomStringConvertible with worded descriptions; network errors
    // get theirs from describeNetworkError, which falls back to the description.
    return oneLine(describeNetworkError(error))
}

private func describe(_ error: DecodingError) -> String {
    switch error {
    case .dataCorrupted(let context), .keyNotFound(_, let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        return (path.isEmpty ? "" : "at \(path): ") + context.debugDescription
    @unknown default:
        return "undecodable"
    }
}

/// Flattens text onto one line for the exit message.
func oneLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
}

enum FileHandleOutput {
    static func stderr(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(2, raw.baseAddress! + offset, raw.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
    }
}

/// One set of option names across protocols: `--timeout` is how long to wait for a connection
/// or handshake, `--duration` how long a command runs. An option renamed to fit keeps its old
/// spelling for one release as a second, hidden option (`--help-hidden` lists it); the command
/// reads the old value when it was given.
enum RenamedOption {
    static func help(now newName: String) -> ArgumentHelp {
        ArgumentHelp("The old name of \(newName); it still works for this release.", visibility: .hidden)
    }
}
