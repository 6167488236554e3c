import ArgumentParser
import Foundation
import WireGuard

#if canImport(Glibc)
import Glibc
#endif

/// `farcast wg`: WireGuard keys today, as `wg genkey`, `wg pubkey` and `wg genpsk` make them
/// (same formats, so either tool reads the other's files). Bringing an interface up comes next
/// (issue 40).
struct WireGuardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wg",
        abstract: "WireGuard keys, in the formats of Debian's wg.",
        discussion: """
            Keys are 32 bytes written as 44 characters of base64. Private and preshared keys are \
            secrets: write them to files only you can read (umask 077), never to a command line.

            Example: umask 077; farcast wg genkey | tee private.key | farcast wg pubkey > public.key
            """,
        subcommands: [GenerateKey.self, PublicKeyCommand.self, GeneratePresharedKey.self]
    )

    struct GenerateKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "genkey",
            abstract: "Print a new private key (base64) on stdout.")

        func run() throws {
            warnIfStdoutIsReadableByOthers()
            print(PrivateKey().base64)
        }
    }

    struct PublicKeyCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pubkey",
            abstract: "Read a private key (base64) on stdin; print its public key.")

        func run() throws {
            let input = FileHandle.standardInput.readData(ofLength: 4096)
            let text = String(decoding: input, as: UTF8.self)
            do {
                print(try PrivateKey(base64: text).publicKey.base64)
            } catch {
                throw CommandFailure(message: "\(error) on stdin (give it a key from `farcast wg genkey` or `wg genkey`)")
            }
        }
    }

    struct GeneratePresharedKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "genpsk",
            abstract: "Print a new preshared key (base64) on stdout.")

        func run() throws {
            warnIfStdoutIsReadableByOthers()
            print(PresharedKey.random().base64)
        }
    }
}

/// A secret about to be written to a regular file others may read gets a note on stderr (the
/// key is still written: the user chose the file).
private func warnIfStdoutIsReadableByOthers() {
    var status = stat()
    guard fstat(STDOUT_FILENO, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_mode & 0o077 != 0 else { return }
    FileHandle.standardError.write(Data("farcast: note: writing a secret key to a file others can read; set `umask 077` first\n".utf8))
}
