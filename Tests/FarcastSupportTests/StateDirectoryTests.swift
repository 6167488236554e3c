import FarcastSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A private scratch folder removed after the test.
struct ScratchFolder: ~Copyable {
    let path: String
    init() {
        var template = Array("/tmp/farcast-test-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    deinit { _ = system("rm -rf '\(path)'") }
}

@Suite struct StateDirectoryTests {
    @Test func prefersXDGStateHome() throws {
        let dir = try StateDirectory.resolve(environment: ["XDG_STATE_HOME": "/x/state", "HOME": "/home/u"])
        #expect(dir.path == "/x/state/farcast")
    }

    @Test func fallsBackToHomeLocalState() throws {
        #expect(try StateDirectory.resolve(environment: ["HOME": "/home/u"]).path == "/home/u/.local/state/farcast")
        // The XDG spec says relative values are invalid and must be ignored.
        #expect(try StateDirectory.resolve(environment: ["XDG_STATE_HOME": "rel", "HOME": "/home/u"]).path == "/home/u/.local/state/farcast")
    }

    @Test func failsWithoutAnyHome() {
        #expect(throws: StateDirectoryError.noHomeDirectory) { try StateDirectory.resolve(environment: [:]) }
    }

    @Test func writesPrivateFilesAndFoldersWhateverTheUmask() throws {
        let scratch = ScratchFolder()
        let dir = StateDirectory(path: scratch.path + "/state/farcast")
        let old = umask(0)
        defer { umask(old) }
        try dir.write(Array("secret".utf8), to: "rfb/pins.json")
        #expect(try dir.permissions(of: "rfb/pins.json") == 0o600)
        var st = stat()
        #expect(stat(dir.path + "/rfb", &st) == 0)
        #expect(UInt32(st.st_mode) & 0o777 == 0o700)
        #expect(stat(dir.path, &st) == 0)
        #expect(UInt32(st.st_mode) & 0o777 == 0o700)
        #expect(try dir.read("rfb/pins.json") == Array("secret".utf8))
    }

    @Test func overwriteReplacesAtomicallyAndTightensLooseModes() throws {
        let scratch = ScratchFolder()
        let dir = StateDirectory(path: scratch.path)
        try dir.write([1, 2, 3], to: "id")
        #expect(chmod(scratch.path + "/id", 0o644) == 0)
        try dir.write([4], to: "id")
        #expect(try dir.read("id") == [4])
        #expect(try dir.permissions(of: "id") == 0o600)
        // No temporary file is left behind.
        #expect(try dir.permissions(of: "id.tmp-\(getpid())") == nil)
    }

    @Test func missingFilesReadAsNilAndRemoveIsIdempotent() throws {
        let scratch = ScratchFolder()
        let dir = StateDirectory(path: scratch.path)
        #expect(try dir.read("absent") == nil)
        try dir.remove("absent")
        try dir.write([1], to: "present")
        try dir.remove("present")
        #expect(try dir.read("present") == nil)
    }

    @Test(arguments: ["", "../escape", "a/../b", "./x", "a//b", "/abs"])
    func rejectsNamesThatEscape(name: String) {
        let dir = StateDirectory(path: "/tmp/never-used")
        #expect(throws: StateDirectoryError.invalidName(name)) { try dir.write([1], to: name) }
    }

    @Test func refusesAFileWhereTheFolderShouldBe() throws {
        let scratch = ScratchFolder()
        let dir = StateDirectory(path: scratch.path)
        try dir.write([1], to: "blocker")
        let nested = StateDirectory(path: scratch.path + "/blocker")
        #expect(throws: StateDirectoryError.notADirectory(scratch.path + "/blocker")) { try nested.ensureExists() }
    }

    @Test func unreadableFileGivesAnActionableError() throws {
        guard getuid() != 0 else {
            // root reads mode-000 files anyway; prove the error path with a directory instead.
            let scratch = ScratchFolder()
            let dir = StateDirectory(path: scratch.path)
            try dir.write([1], to: "sub/file")
            #expect(throws: StateDirectoryError.self) { try dir.read("sub") }
            return
        }
        let scratch = ScratchFolder()
        let dir = StateDirectory(path: scratch.path)
        try dir.write([1], to: "locked")
        #expect(chmod(scratch.path + "/locked", 0) == 0)
        #expect(throws: StateDirectoryError.self) { try dir.read("locked") }
    }
}
