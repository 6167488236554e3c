import ArgumentParser
import FarcastSupport
import Foundation
import Hosts

struct HostsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hosts",
        abstract: "The host book: saved hosts with their route and preferences.",
        discussion: """
            Saved hosts live in $XDG_DATA_HOME/farcast/hosts.sqlite (else ~/.local/share/farcast/hosts.sqlite). Every protocol command accepts a saved name where it takes an address: farcast vnc screenshot office -o office.png. Passwords are never stored in the book: `hosts add --password-file` puts one in the secret store (the desktop's Secret Service, else $XDG_STATE_HOME/farcast/secrets.json, mode 0600).

            URL forms: vnc://[user@]host[:port], vncs://…, sendspin://host[:port][/path], punktfunk://host[:port], jellyfin://host[:port][/base], jellyfins://…; any TCP one with ?ssh=user@bastion[:port].
            """,
        subcommands: [HostsAddCommand.self, HostsListCommand.self, HostsShowCommand.self, HostsEditCommand.self, HostsRemoveCommand.self,
                      HostsExportCommand.self, HostsImportCommand.self]
    )
}

/// Preferences every `hosts add` and `hosts edit` accepts.
struct HostPreferenceOptions: ParsableArguments {
    @Option(help: ArgumentHelp("VNC encodings to ask for, most preferred first, comma-separated.", valueName: "list"))
    var encodings: String?

    @Option(help: ArgumentHelp("VNC JPEG quality 0-9.", valueName: "0-9"))
    var quality: Int?

    @Option(help: ArgumentHelp("Viewer scaling: fit, fill, none or a factor.", valueName: "mode"))
    var scaling: String?

    @Option(help: ArgumentHelp("The monitor to show or capture (0 is the first).", valueName: "n"))
    var monitor: Int?

    @Option(name: .customLong("view-only"), help: ArgumentHelp("Never send input to this host: true or false.", valueName: "bool"))
    var viewOnly: Bool?

    @Option(name: .customLong("output-device"), help: ArgumentHelp("Sendspin: the ALSA device to play on.", valueName: "name"))
    var outputDevice: String?

    @Option(help: ArgumentHelp("Bitrate in kbit/s (punktfunk, Jellyfin).", valueName: "kbps"))
    var bitrate: Int?

    @Option(name: .customLong("ssh-via"), help: ArgumentHelp("Which SSH client carries this host's route: openssh, builtin, or auto (the command decides).", valueName: "auto|openssh|builtin"))
    var sshVia: SSHVia?

    @Option(help: ArgumentHelp("Free text kept with the host.", valueName: "text"))
    var notes: String?

    func validate() throws {
        if let quality, !(0...9).contains(quality) { throw ValidationError("--quality must be 0…9") }
        if let monitor, monitor < 0 { throw ValidationError("--monitor counts from 0") }
        if let bitrate, !(1...1_000_000).contains(bitrate) { throw ValidationError("--bitrate must be 1…1000000 kbit/s") }
        if let scaling, !["fit", "fill", "none"].contains(scaling), Double(scaling).map({ $0 <= 0 || $0 > 16 }) ?? true {
            throw ValidationError("--scaling must be fit, fill, none or a factor within 0…16")
        }
    }

    func apply(to preferences: inout HostPreferences) {
        if let encodings {
            let list = encodings.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            preferences.encodings = list.isEmpty ? nil : list
        }
        if let quality { preferences.quality = quality }
        if let scaling { preferences.scaling = scaling }
        if let monitor { preferences.monitor = monitor }
        if let viewOnly { preferences.viewOnly = viewOnly }
        if let outputDevice { preferences.outputDevice = outputDevice }
        if let bitrate { preferences.bitrateKbps = bitrate }
        if let sshVia { preferences.sshVia = sshVia == .auto ? nil : sshVia.rawValue }
    }
}

/// Opens the book, turning its errors into one-line failures.
func openHostBook() throws -> HostBook {
    do { return try HostBook(path: HostBook.defaultPath()) } catch { throw CommandFailure(message: describe(error)) }
}

/// The host saved as `name`, or the failure that says there is none.
func savedHost(named name: String, in book: HostBook) throws -> SavedHost {
    let found: SavedHost?
    do { found = try book.host(named: name) } catch { throw CommandFailure(message: describe(error)) }
    guard let found else { throw CommandFailure(message: HostBookError.notFound(name).description) }
    return found
}

func secretStore() throws -> any SecretStore {
    do {
        return try SecretStores.preferred(stateDirectory: try StateDirectory.resolve())
    } catch {
        throw CommandFailure(message: "no secret store: \(describe(error))")
    }
}

/// A saved host as JSON and text.
struct HostReport: Encodable {
    var name: String
    var `protocol`: String
    var url: String
    var address: String
    var port: Int
    var user: String?
    var ssh: String?
    var preferences: HostPreferences
    var lastConnected: String?
    var notes: String?
    var createdAt: String
    var hasSecret: Bool?
    var pins: [String: String]?

    init(_ host: SavedHost, hasSecret: Bool? = nil, pins: [String: String]? = nil) {
        name = host.name
        self.protocol = host.kind.rawValue
        url = host.hostAddress.url
        address = host.address
        port = host.port
        user = host.user
        ssh = host.sshRoute
        preferences = host.preferences
        lastConnected = host.lastConnected.map { ISO8601DateFormatter().string(from: $0) }
        notes = host.notes
        createdAt = ISO8601DateFormatter().string(from: host.createdAt)
        self.hasSecret = hasSecret
        self.pins = pins
    }
}

struct HostsAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Save a host under a name.",
        discussion: """
            Examples: farcast hosts add office vnc://10.0.0.5:5901 --ssh me@bastion.example.com --quality 6
                      farcast hosts add kitchen sendspin://kitchen.local
                      farcast discover --json   (then add what it lists by its url)
            """
    )

    @Argument(help: "The name to save it under (no '/', ':' or '@').")
    var name: String

    @Argument(help: "The host's URL: vnc://, vncs://, sendspin://, punktfunk://, jellyfin://, jellyfins:// (optionally ?ssh=user@bastion).")
    var url: String

    @Option(help: ArgumentHelp("Reach it through this SSH server.", valueName: "user@host[:port]"))
    var ssh: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("Keep the host's password (first line of this file) in the secret store, not in the book.", valueName: "path"))
    var passwordFile: String?

    @OptionGroup var preferences: HostPreferenceOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        do { try SavedHost.validate(name: name) } catch { throw ValidationError(describe(error)) }
        do { _ = try address() } catch let failure as CommandFailure { throw ValidationError(failure.message) }
        if let passwordFile {
            do { _ = try Secrets.readFirstLine(ofFile: passwordFile) } catch let failure as CommandFailure { throw ValidationError(failure.message) }
        }
    }

    func address() throws -> HostAddress {
        var address: HostAddress
        do { address = try HostAddress(parsing: url) } catch { throw CommandFailure(message: describe(error), exitCode: 2) }
        if let ssh {
            guard address.kind.isTCP else { throw CommandFailure(message: "\(address.kind) runs over UDP, which an SSH tunnel cannot carry", exitCode: 2) }
            do { address.ssh = try SSHRoute(parsing: ssh) } catch { throw CommandFailure(message: describe(error), exitCode: 2) }
        }
        return address
    }

    func run() async throws {
        try await reportingFailures {
            var host = SavedHost(name: name, address: try address(), notes: preferences.notes)
            preferences.apply(to: &host.preferences)
            let book = try openHostBook()
            do { try book.add(host) } catch { throw CommandFailure(message: describe(error)) }
            var stored: String?
            if let passwordFile {
                let store = try secretStore()
                let (password, _) = try Secrets.readFirstLine(ofFile: passwordFile)
                do { try store.setSecret(password, for: host.secretAccount) } catch { throw CommandFailure(message: describe(error)) }
                stored = store.name
            }
            if global.json {
                try printJSON(HostReport(host, hasSecret: passwordFile != nil))
            } else {
                print("saved \(host.name): \(host.hostAddress.url)" + (stored.map { " (password in \($0))" } ?? ""))
            }
        }
    }
}

struct HostsListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the saved hosts.",
        discussion: "Example: farcast hosts ls --json"
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let hosts: [SavedHost]
            do { hosts = try openHostBook().all() } catch let failure as CommandFailure { throw failure } catch { throw CommandFailure(message: describe(error)) }
            if global.json {
                try printJSONList(hosts.map { HostReport($0) })
                return
            }
            if hosts.isEmpty {
                print("no saved hosts (add one with `farcast hosts add NAME URL`)")
                return
            }
            let width = max(4, hosts.map(\.name.count).max() ?? 4)
            print("NAME".padding(toLength: width, withPad: " ", startingAt: 0) + "  PROTOCOL   URL")
            for host in hosts {
                print(host.name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + host.kind.rawValue.padding(toLength: 9, withPad: " ", startingAt: 0)
                      + "  " + host.hostAddress.url)
            }
        }
    }
}

struct HostsShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one saved host: address, route, preferences, whether a password is stored, and its trust pins.",
        discussion: "Example: farcast hosts show office"
    )

    @Argument(help: "The saved host's name.")
    var name: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let host = try savedHost(named: name, in: try openHostBook())
            // nil when the store cannot be read (no keyring running): unknown, not absent.
            let hasSecret: Bool?
            do { hasSecret = try secretStore().secret(for: host.secretAccount) != nil } catch { hasSecret = nil }
            let pins = Self.pins(for: host)
            let report = HostReport(host, hasSecret: hasSecret, pins: pins)
            if global.json {
                try printJSON(report)
                return
            }
            print("name          \(report.name)")
            print("protocol      \(report.protocol)")
            print("url           \(report.url)")
            print("ssh route     \(report.ssh ?? "none")")
            let preferences = (try? jsonString(report.preferences)) ?? "{}"
            print("preferences   \(preferences)")
            print("last used     \(report.lastConnected ?? "never")")
            print("password      \(hasSecret == true ? "stored in the secret store" : "none stored")")
            for (key, value) in pins.sorted(by: { $0.key < $1.key }) { print("pin           \(key) \(value)") }
            if let notes = report.notes { print("notes         \(notes)") }
        }
    }

    /// The trust pins farcast keeps for this host (VNC TLS certificates and RSA-AES keys, the
    /// punktfunk host's certificate).
    static func pins(for host: SavedHost) -> [String: String] {
        guard let directory = try? StateDirectory.resolve() else { return [:] }
        var pins: [String: String] = [:]
        switch host.kind {
        case .vnc:
            let store = TrustStore(directory: directory, fileName: "vnc/pins.json")
            let key = host.address.contains(":") ? "[\(host.address)]:\(host.port)" : "\(host.address):\(host.port)"
            if let pin = try? store.pin(for: key) { pins["tls " + key] = pin }
            if let pin = try? store.pin(for: "rsa-aes " + key) { pins["rsa-aes " + key] = pin }
        case .punktfunk:
            // Keyed as the punktfunk client keys it (PunktfunkClient.Options.peerKey).
            let store = TrustStore(directory: directory, fileName: "punktfunk/pins.json")
            let key = "\(host.address.lowercased()):\(host.port)"
            if let pin = try? store.pin(for: key) { pins["tls " + key] = pin }
        case .sendspin, .jellyfin:
            break
        }
        return pins
    }
}

struct HostsEditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Change a saved host: its URL, route, name, preferences or notes.",
        discussion: """
            Examples: farcast hosts edit office --ssh me@new-bastion
                      farcast hosts edit office --no-ssh --quality 9 --rename office-direct
            """
    )

    @Argument(help: "The saved host's name.")
    var name: String

    @Option(help: ArgumentHelp("A new URL.", valueName: "url"))
    var url: String?

    @Option(help: ArgumentHelp("A new SSH route.", valueName: "user@host[:port]"))
    var ssh: String?

    @Flag(name: .customLong("no-ssh"), help: "Connect directly from now on.")
    var noSSH = false

    @Option(help: ArgumentHelp("A new name.", valueName: "name"))
    var rename: String?

    @OptionGroup var preferences: HostPreferenceOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if ssh != nil && noSSH { throw ValidationError("--ssh and --no-ssh contradict each other") }
        if let url { do { _ = try HostAddress(parsing: url) } catch { throw ValidationError(describe(error)) } }
        if let ssh { do { _ = try SSHRoute(parsing: ssh) } catch { throw ValidationError(describe(error)) } }
        if let rename { do { try SavedHost.validate(name: rename) } catch { throw ValidationError(describe(error)) } }
    }

    func run() async throws {
        try await reportingFailures {
            let book = try openHostBook()
            let newAddress = try url.map { text throws -> HostAddress in
                do { return try HostAddress(parsing: text) } catch { throw CommandFailure(message: describe(error), exitCode: 2) }
            }
            let route = ssh, clearRoute = noSSH, newName = rename, prefs = preferences
            let updated: SavedHost
            do {
                updated = try book.update(named: name) { host in
                    if let newAddress {
                        let keep = host
                        host = SavedHost(name: keep.name, address: newAddress, preferences: keep.preferences, notes: keep.notes, createdAt: keep.createdAt)
                        host.lastConnected = keep.lastConnected
                        if newAddress.ssh == nil { host.sshRoute = keep.sshRoute }
                    }
                    if let route { host.sshRoute = try SSHRoute(parsing: route).description }
                    if clearRoute { host.sshRoute = nil }
                    if let newName { host.name = newName }
                    prefs.apply(to: &host.preferences)
                    if let notes = prefs.notes { host.notes = notes.isEmpty ? nil : notes }
                    if !host.kind.isTCP, host.sshRoute != nil { throw HostBookError.invalidImport("\(host.kind) runs over UDP, which an SSH tunnel cannot carry") }
                }
            } catch let error as HostBookError {
                throw CommandFailure(message: describe(error))
            }
            if global.json { try printJSON(HostReport(updated)) } else { print("saved \(updated.name): \(updated.hostAddress.url)") }
        }
    }
}

struct HostsRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Forget a saved host (and its stored password).",
        discussion: "Example: farcast hosts rm office"
    )

    @Argument(help: "The saved host's name.")
    var name: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let book = try openHostBook()
            let host = try savedHost(named: name, in: book)
            do { try book.remove(named: name) } catch { throw CommandFailure(message: describe(error)) }
            try? secretStore().removeSecret(for: host.secretAccount)
            struct Removed: Encodable { var removed: String }
            if global.json { try printJSON(Removed(removed: host.name)) } else { print("removed \(host.name)") }
        }
    }
}

/// The export file: the hosts, and their passwords only when asked for.
struct HostExport: Codable {
    var format: String = "farcast-hosts/1"
    var hosts: [SavedHost]
    var secrets: [String: String]?
}

struct HostsExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the saved hosts as JSON (no passwords unless --with-secrets).",
        discussion: "Example: farcast hosts export -o hosts.json"
    )

    @Option(name: .shortAndLong, help: ArgumentHelp("Write here instead of standard output (created 0600).", valueName: "path"))
    var output: String?

    @Flag(name: .customLong("with-secrets"), help: "Include the stored passwords (the file is then as secret as they are).")
    var withSecrets = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let hosts: [SavedHost]
            do { hosts = try openHostBook().all() } catch let failure as CommandFailure { throw failure } catch { throw CommandFailure(message: describe(error)) }
            var export = HostExport(hosts: hosts)
            if withSecrets {
                let store = try secretStore()
                var secrets: [String: String] = [:]
                for host in hosts {
                    if let value = try store.secret(for: host.secretAccount) { secrets[host.name] = value }
                }
                export.secrets = secrets
            }
            let text = try Self.encode(export)
            if let output {
                try OutputPath.check(output, what: "export")
                let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw CommandFailure(message: "cannot write \(output): \(String(cString: strerror(errno)).lowercased())") }
                let bytes = Array(text.utf8)
                let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
                guard written == bytes.count else { throw CommandFailure(message: "cannot write \(output)") }
                struct Exported: Encodable { var path: String; var hosts: Int }
                if global.json { try printJSON(Exported(path: output, hosts: hosts.count)) } else { print("wrote \(hosts.count) host(s) to \(output)") }
            } else {
                print(text)
            }
        }
    }

    static func encode(_ export: HostExport) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(export), as: UTF8.self)
    }
}

struct HostsImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Add the hosts of an export file (all or none).",
        discussion: "Example: farcast hosts import hosts.json --replace"
    )

    @Argument(help: "A file written by `farcast hosts export`.")
    var file: String

    @Flag(help: "Overwrite saved hosts of the same name (else the import fails on the first).")
    var replace = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let (text, _) = try Secrets.readWhole(ofFile: file, what: "host export")
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let export: HostExport
            do { export = try decoder.decode(HostExport.self, from: Data(text.utf8)) } catch {
                throw CommandFailure(message: "\(file) is not a farcast host export: \(describe(error))", exitCode: 2)
            }
            guard export.format == "farcast-hosts/1" else {
                throw CommandFailure(message: "\(file) has format \(export.format); this farcast reads farcast-hosts/1", exitCode: 2)
            }
            do { try openHostBook().importHosts(export.hosts, replace: replace) } catch let error as HostBookError {
                throw CommandFailure(message: describe(error))
            }
            if let secrets = export.secrets, !secrets.isEmpty {
                let store = try secretStore()
                for host in export.hosts {
                    if let value = secrets[host.name] { try store.setSecret(value, for: host.secretAccount) }
                }
            }
            struct Imported: Encodable { var imported: Int }
            if global.json { try printJSON(Imported(imported: export.hosts.count)) } else { print("imported \(export.hosts.count) host(s)") }
        }
    }
}
