import Foundation
import Testing

/// The Secret Service backend against a real one: GNOME Keyring on a private D-Bus session bus
/// (`dbus-run-session`), its login keyring unlocked with a test password, in a HOME of the
/// test's own. farcast must put a saved host's password there (read back with libsecret's own
/// `secret-tool`), not in its state directory and not in the host book.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(2)))
struct SecretServiceTests {
    @Test func aSavedHostsPasswordGoesToTheKeyringAndNowhereElse() throws {
        let folder = try TemporaryFolder()
        let sessionTool = try requireExecutable("dbus-run-session", package: "dbus")
        _ = try requireExecutable("gnome-keyring-daemon", package: "gnome-keyring")
        _ = try requireExecutable("secret-tool", package: "libsecret-tools")
        let secret = "keyring-\(UUID().uuidString)"
        let passwordFile = folder.path + "/pw"
        try (secret + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = folder.path
        environment["XDG_DATA_HOME"] = folder.path + "/data"
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["XDG_RUNTIME_DIR"] = folder.path
        environment["FARCAST_SECRET_STORE"] = nil
        // The keyring runs in the foreground as this script's child and is ended with it: a
        // daemonized one would outlive the test and hold its output pipes open.
        let script = """
            printf 'unlock' | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>"$XDG_RUNTIME_DIR/keyring.log" &
            keyring=$!
            trap 'kill $keyring 2>/dev/null' EXIT
            tries=0
            until dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q true; do
                tries=$((tries + 1)); [ $tries -le 100 ] || { cat "$XDG_RUNTIME_DIR/keyring.log" >&2; exit 9; }; sleep 0.1
            done
            "$0" hosts add office vnc://10.0.0.5 --password-file "$1" || exit 10
            "$0" hosts show office --json || exit 11
            secret-tool lookup account host:office
            """
        // Spawned as BackgroundProcess does (default signal mask): a child of Foundation's
        // Process inherits the test thread's blocked SIGTERM, and dbus-run-session could then
        // never end its bus daemon.
        let session = try BackgroundProcess(sessionTool, ["--", "sh", "-c", "{\n" + script + "\n} >\"$XDG_RUNTIME_DIR/out\"", try farcastBinary(), passwordFile],
                                            environment: environment, logName: "secret-service")
        defer { session.stop() }
        #expect(session.waitForExit(timeout: 60), "the keyring session hung: \(session.log)")
        #expect(session.terminationStatus == 0, "\(session.log)")
        let stdout = (try? String(contentsOfFile: folder.path + "/out", encoding: .utf8)) ?? ""
        #expect(stdout.contains("\"has_secret\":true"), "\(stdout)")
        #expect(stdout.hasSuffix(secret), "secret-tool did not find the password: \(stdout)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/state/farcast/secrets.json"))
        for file in (try? FileManager.default.contentsOfDirectory(atPath: folder.path + "/data/farcast")) ?? [] {
            let bytes = FileManager.default.contents(atPath: folder.path + "/data/farcast/" + file) ?? Data()
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(file) holds the password")
        }
    }
}
