import Foundation
import Testing

/// An input method on a test's X display, as a desktop runs one: a private D-Bus session bus
/// and IBus (Debian `ibus`, with the m17n engines of `ibus-m17n`/`m17n-db`), its files under a
/// home folder of its own, with one engine selected. A program started with `environment`
/// types through it: SDL asks IBus to process each key and receives the committed text.
final class IBusInputMethod: Sendable {
    let home: String
    let busAddress: String
    private let bus: BackgroundProcess
    private let daemon: BackgroundProcess

    /// Environment for a program that should type through this input method.
    var environment: [String: String] {
        ["HOME": home, "XDG_CONFIG_HOME": home + "/.config", "DBUS_SESSION_BUS_ADDRESS": busAddress, "SDL_IM_MODULE": "ibus"]
    }

    init(on screen: some XDisplay, engine: String, folder: TemporaryFolder) throws {
        let dbus = try requireExecutable("dbus-daemon", package: "dbus")
        let ibusDaemon = try requireExecutable("ibus-daemon", package: "ibus")
        let ibus = try requireExecutable("ibus", package: "ibus")
        guard FileManager.default.fileExists(atPath: "/usr/share/m17n/latn-pre.mim") else {
            throw MissingPeer(what: "the m17n input method tables (Debian packages ibus-m17n and m17n-db)")
        }
        home = folder.path + "/ibus-home-\(screen.display)"
        try FileManager.default.createDirectory(atPath: home + "/.config", withIntermediateDirectories: true)
        // SDL's IBus support talks D-Bus and gives up without a session bus.
        let bus = try BackgroundProcess(dbus, ["--session", "--nofork", "--print-address=1", "--address=unix:path=\(folder.path)/dbus-\(screen.display)"],
                                        logName: "dbus-session")
        self.bus = bus
        var address = ""
        try waitUntil("the D-Bus session bus to print its address", timeout: 10) {
            address = bus.log.split(separator: "\n").first { $0.hasPrefix("unix:") }.map(String.init) ?? ""
            return !address.isEmpty
        }
        busAddress = address
        var env = screen.environment
        env["HOME"] = home
        env["XDG_CONFIG_HOME"] = home + "/.config"
        env["DBUS_SESSION_BUS_ADDRESS"] = address
        let daemon = try BackgroundProcess(ibusDaemon, ["--replace", "--panel=disable", "--emoji-extension=disable", "--config=disable"],
                                           environment: env, logName: "ibus-daemon")
        self.daemon = daemon
        // The engine list is loaded a moment after the daemon starts: select until it holds.
        var current = ""
        do {
            try waitUntil("IBus to run engine \(engine)", timeout: 15) {
                guard daemon.isRunning else { throw PeerFailed(name: "ibus-daemon", log: daemon.log) }
                _ = try run(ibus, ["engine", engine], environment: env, timeout: 10)
                current = try run(ibus, ["engine"], environment: env, timeout: 10).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                return current == engine
            }
        } catch {
            Issue.record("ibus engine reported '\(current)'; ibus-daemon said: \(daemon.log)")
            throw error
        }
    }

    func stop() {
        daemon.stop()
        bus.stop()
    }

    deinit { stop() }
}
