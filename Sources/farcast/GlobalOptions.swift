import ArgumentParser
import FarcastSupport
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

/// A failure the user should see as one line, with the exit code to leave with.
struct CommandFailure: Error {
    var message: String
    var exitCode: Int32 = 1
}

/// Runs a command body; any failure becomes one line on stderr ("farcast: reason") and a
/// non-zero exit code. Usage errors keep ArgumentParser's own formatting.
func reportingFailures(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as ExitCode {
        throw error
    } catch let error as CleanExit {
        throw error
    } catch let error as ValidationError {
        throw error
    } catch let failure as CommandFailure {
        FileHandleOutput.stderr("farcast: \(failure.message)\n")
        throw ExitCode(failure.exitCode)
    } catch {
        FileHandleOutput.stderr("farcast: \(oneLine(error))\n")
        throw ExitCode(1)
    }
}

/// Flattens an error's description onto one line for the exit message.
func oneLine(_ error: any Error) -> String {
    String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
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
