import Foundation
import Testing

/// The Secret Service backend against a real one: GNOME Keyring on a private D-Bus session bus
/// (`dbus-run-session`), its login keyring unlocked with a test password, in a HOME of the
/// test's own. farcast must put a saved host's password there (read back with libsecret's own
/// `secret-tool`), not in its state directory and not in the host book.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SecretServiceTests {
    @Test func aSavedHostsPasswordGoesToTheKeyringAndNowhereElse() throws {
        let folder = try TemporaryFolder()
        let session = try requireExecutable("dbus-run-session", package: "dbus")
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
        let script = """
            printf 'unlock' | gnome-keyring-daemon --unlock --components=secrets >/dev/null || exit 9
            "$0" hosts add office vnc://10.0.0.5 --password-file "$1" || exit 10
            "$0" hosts show office --json || exit 11
            secret-tool lookup account host:office
            """
        let result = try run(session, ["--", "sh", "-c", script, try farcastBinary(), passwordFile], environment: environment, timeout: 60)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("\"has_secret\":true"), "\(result.stdout)")
        #expect(result.stdout.hasSuffix(secret), "secret-tool did not find the password: \(result.stdout)")
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/state/farcast/secrets.json"))
        for file in (try? FileManager.default.contentsOfDirectory(atPath: folder.path + "/data/farcast")) ?? [] {
            let bytes = FileManager.default.contents(atPath: folder.path + "/data/farcast/" + file) ?? Data()
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(file) holds the password")
        }
    }
}
