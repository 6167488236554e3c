import ArgumentParser
import FarcastSupport
import Foundation

/// `farcast doctor`: reports what Farcast would use on this machine, so a user can see at a
/// glance where state lives and whether it is private.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Show the state directory, its permissions and the clocks Farcast reads.",
        discussion: "Creates the state directory if it is missing (mode 0700) and checks that a file written there gets mode 0600."
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.doctor")
            let state = try StateDirectory.resolve()
            try state.ensureExists()
            logger.debug("state directory resolved", metadata: ["path": "\(state.path)"])
            let probe = "doctor-probe"
            try state.write(Array("ok".utf8), to: probe)
            let mode = try state.permissions(of: probe) ?? 0
            try state.remove(probe)
            let monotonic = SystemClock(.monotonic).now()
            let raw = SystemClock(.monotonicRaw).now()
            let report = DoctorReport(
                version: FarcastInfo.version,
                stateDirectory: state.path,
                stateFileMode: String(mode, radix: 8),
                stateFilesPrivate: mode == 0o600,
                clockMonotonicNs: monotonic.nanoseconds,
                clockMonotonicRawNs: raw.nanoseconds
            )
            if global.json {
                try printJSON(report)
            } else {
                print("farcast \(report.version)")
                print("state directory   \(report.stateDirectory)")
                print("state file mode   \(report.stateFileMode)\(report.stateFilesPrivate ? " (private)" : " (NOT private: check the file system)")")
                print("CLOCK_MONOTONIC      \(String(format: "%.6f", Double(report.clockMonotonicNs) / 1e9)) s")
                print("CLOCK_MONOTONIC_RAW  \(String(format: "%.6f", Double(report.clockMonotonicRawNs) / 1e9)) s")
            }
            if !report.stateFilesPrivate {
                throw CommandFailure(message: "state files in \(state.path) are not private (mode \(report.stateFileMode))")
            }
        }
    }
}

struct DoctorReport: Codable {
    var version: String
    var stateDirectory: String
    var stateFileMode: String
    var stateFilesPrivate: Bool
    var clockMonotonicNs: Int64
    var clockMonotonicRawNs: Int64
}
