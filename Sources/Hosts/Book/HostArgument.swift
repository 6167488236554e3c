import Foundation

/// What a command's server argument names, looked up in one place for every protocol: a saved
/// host's name (the host book, read locally before any network activity), a URL of the
/// protocol, or neither — the protocol's own address form (`host:1` for VNC, `host:9777` for
/// punktfunk), which the caller parses.
public enum HostArgument: Sendable, Equatable {
    case saved(SavedHost)
    case url(HostAddress)
    case other

    /// The address a saved host or URL gives; nil for `.other`.
    public var address: HostAddress? {
        switch self {
        case .saved(let host): return host.hostAddress
        case .url(let address): return address
        case .other: return nil
        }
    }

    /// The book's entry (preferences, secrets, last used) when the argument named one.
    public var savedHost: SavedHost? {
        if case .saved(let host) = self { return host }
        return nil
    }

    /// Whether `argument` could be a saved host's name: names never contain what addresses do
    /// (`/`, `:`, `@`, `[`), so an address is never looked up and a name never parsed as one.
    public static func couldBeName(_ argument: String) -> Bool {
        !argument.contains("/") && !argument.contains(":") && !argument.contains("@") && !argument.contains("[")
    }

    /// The saved host named `argument` in the book at `bookPath`; nil when the argument cannot be
    /// a name, no book exists yet, or the book has no such host. A saved name wins over a bare
    /// host name of the same spelling.
    public static func savedHost(named argument: String, bookPath: String = HostBook.defaultPath()) throws(HostBookError) -> SavedHost? {
        guard couldBeName(argument), FileManager.default.fileExists(atPath: bookPath) else { return nil }
        return try HostBook(path: bookPath).host(named: argument)
    }

    /// Looks `argument` up for a command of protocol `kind`. A saved host or URL of another
    /// protocol is an error (before anything is sent), as is a URL that does not parse.
    public static func lookUp(_ argument: String, as kind: HostProtocol,
                              bookPath: String = HostBook.defaultPath()) throws(HostLookupError) -> HostArgument {
        let saved: SavedHost?
        do { saved = try savedHost(named: argument, bookPath: bookPath) } catch { throw .book(error) }
        if let saved {
            guard saved.kind == kind else { throw .savedForAnotherProtocol(name: saved.name, saved: saved.kind, wanted: kind) }
            return .saved(saved)
        }
        guard HostAddress.looksLikeURL(argument) else { return .other }
        let address: HostAddress
        do { address = try HostAddress(parsing: argument) } catch { throw .url(error) }
        guard address.kind == kind else { throw .urlOfAnotherProtocol(argument, address: address.kind, wanted: kind) }
        return .url(address)
    }

    /// Records a successful connection when `argument` named a saved host (best effort: a
    /// read-only book or a missing host is no failure of the command).
    public static func markConnected(_ argument: String, bookPath: String = HostBook.defaultPath()) {
        guard couldBeName(argument), FileManager.default.fileExists(atPath: bookPath),
              let book = try? HostBook(path: bookPath), (try? book.host(named: argument)) != nil else { return }
        try? book.markConnected(named: argument)
    }
}

/// Why a server argument could not be looked up.
public enum HostLookupError: Error, Equatable, Sendable, CustomStringConvertible {
    case savedForAnotherProtocol(name: String, saved: HostProtocol, wanted: HostProtocol)
    case urlOfAnotherProtocol(String, address: HostProtocol, wanted: HostProtocol)
    case url(HostAddress.ParseError)
    case book(HostBookError)

    public var description: String {
        switch self {
        case .savedForAnotherProtocol(let name, let saved, let wanted): return "the saved host '\(name)' is a \(saved) host, not \(wanted)"
        case .urlOfAnotherProtocol(let text, let address, let wanted): return "'\(text)' is a \(address) address; this command needs \(wanted)"
        case .url(let error): return error.description
        case .book(let error): return error.description
        }
    }
}
