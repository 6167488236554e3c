public import Foundation
import FarcastStore
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the offline index could not be read or changed.
public enum OfflineError: Error, Sendable, Equatable, CustomStringConvertible {
    case storage(String)
    /// Nothing downloaded matches what the user named.
    case notDownloaded(String)
    /// The name matches several downloads: their names, to pick one by id.
    case ambiguous(String, candidates: [String])

    public var description: String {
        switch self {
        case .storage(let reason): return "the offline index: \(reason)"
        case .notDownloaded(let text):
            return "nothing called '\(text)' is downloaded (see `farcast jellyfin offline ls`; download with `farcast jellyfin download`)"
        case .ambiguous(let text, let candidates):
            return "'\(text)' names several downloads (\(candidates.prefix(5).joined(separator: "; "))): name one by its id"
        }
    }
}

/// The server and user a download belongs to.
public struct OfflineAccount: Sendable, Hashable {
    public var serverId: String
    public var serverName: String
    public var userId: String
    public var userName: String

    public init(serverId: String, serverName: String, userId: String, userName: String) {
        (self.serverId, self.serverName, self.userId, self.userName) = (serverId, serverName, userId, userName)
    }
}

/// One downloaded item: enough of the server's item to list, find and play it with no server,
/// where its file and picture are, the user's data as the server last told it, and playback made
/// offline that has not reached the server yet.
public struct OfflineEntry: Sendable, Hashable {
    public var account: OfflineAccount
    public var item: JellyfinItem
    public var filePath: String
    public var fileBytes: Int64
    /// The item's primary image, kept beside the index (nil: the item has none).
    public var imagePath: String?
    public var downloadedAt: Date
    /// The user's data on the server, as of the download or the last sync.
    public var serverData: UserItemData
    /// Playback made offline, waiting to reach the server.
    public var pending: OfflineProgress?

    /// Where offline playback resumes: the later of the server's position and the one played
    /// offline, with the server's default thresholds (under 5 % of the runtime: from the start;
    /// over 90 %: played, from the start). The server applies its own when the progress syncs.
    public var resumeSeconds: Double {
        if let pending, pending.isNewer(than: serverData) {
            return OfflineProgress.resumeTicks(pending.positionTicks, runtimeTicks: item.runTimeTicks).map { Double($0) / 10_000_000 } ?? 0
        }
        return Double(serverData.playbackPositionTicks) / 10_000_000
    }

    /// Played, as far as this machine knows: offline playback to the end (or past 90 %) later
    /// than the server's last playback, else what the server said.
    public var isPlayed: Bool {
        if let pending, pending.isNewer(than: serverData) {
            return pending.finished || OfflineProgress.resumeTicks(pending.positionTicks, runtimeTicks: item.runTimeTicks) == nil
        }
        return serverData.played
    }

    /// Whether the file is where the index says, at the size it had.
    public var fileIsPresent: Bool {
        var info = stat()
        return stat(filePath, &info) == 0 && Int64(info.st_size) == fileBytes
    }
}

/// A position played offline for one item (the latest one: each save replaces the last).
public struct OfflineProgress: Sendable, Hashable {
    public var itemId: String
    /// Where playback stopped, raw (the server's rules apply when it syncs).
    public var positionTicks: Int64
    /// The media played to its end.
    public var finished: Bool
    public var updatedAt: Date

    /// Whether this was played after the server's last known playback of the item.
    public func isNewer(than server: UserItemData) -> Bool {
        guard let last = server.lastPlayedDate else { return true }
        return updatedAt > last
    }

    /// The resume point a server on default settings keeps for `ticks`: nil when the item
    /// counts as played (over 90 %), 0 under 5 %.
    static func resumeTicks(_ ticks: Int64, runtimeTicks: Int64?) -> Int64? {
        guard let runtime = runtimeTicks, runtime > 0 else { return ticks }
        let percent = Double(ticks) / Double(runtime) * 100
        if percent < 5 { return 0 }
        if percent > 90 { return nil }
        return ticks
    }
}

/// What this machine has downloaded from Jellyfin servers, so downloads are listed and played
/// with no server (`farcast jellyfin offline ls`, `play --offline`), and the playback made
/// meanwhile is kept until it reaches the server (`JellyfinSession.syncOfflineProgress`).
///
/// An SQLite file (`$XDG_DATA_HOME/farcast/jellyfin-offline.sqlite`, opened as every local
/// database is: `LocalDatabase`) and a folder of images beside it (`jellyfin-offline-images/`).
/// Items are keyed by server, user and item id: two users of one server each have their own
/// progress. Pending progress outlives the item's removal (it is still the user's history).
public final class OfflineLibrary: Sendable {
    public let path: String
    /// Where items' images are kept.
    public let imagesFolder: String
    let pool: DatabasePool

    public init(path: String) throws(OfflineError) {
        self.path = path
        imagesFolder = (path.hasSuffix(".sqlite") ? String(path.dropLast(7)) : path) + "-images"
        do { pool = try LocalDatabase.open(path: path, label: "farcast.jellyfin-offline", migrator: Self.migrator) } catch {
            throw .storage(error.reason)
        }
    }

    /// `$XDG_DATA_HOME/farcast/jellyfin-offline.sqlite`, else under `~/.local/share`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        LocalDatabase.dataPath("jellyfin-offline.sqlite", environment: environment)
    }

    /// Every schema version since the first. Append new migrations; never edit a shipped one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-items-and-progress") { db in
            try db.create(table: "item") { table in
                table.column("server_id", .text).notNull()
                table.column("user_id", .text).notNull()
                table.column("item_id", .text).notNull()
                table.column("server_name", .text).notNull()
                table.column("user_name", .text).notNull()
                table.column("name", .text).notNull()
                table.column("kind", .text).notNull()
                // The rest of the item as the server described it (JSON: OfflineLibrary.StoredItem).
                table.column("detail", .text).notNull()
                table.column("file_path", .text).notNull()
                table.column("file_bytes", .integer).notNull()
                table.column("image_path", .text)
                table.column("downloaded_at", .datetime).notNull()
                table.column("server_position_ticks", .integer).notNull()
                table.column("server_played", .boolean).notNull()
                table.column("server_play_count", .integer).notNull()
                table.column("server_last_played", .datetime)
                table.primaryKey(["server_id", "user_id", "item_id"])
            }
            try db.create(table: "progress") { table in
                table.column("server_id", .text).notNull()
                table.column("user_id", .text).notNull()
                table.column("item_id", .text).notNull()
                table.column("position_ticks", .integer).notNull()
                table.column("finished", .boolean).notNull()
                table.column("updated_at", .datetime).notNull()
                table.primaryKey(["server_id", "user_id", "item_id"])
            }
        }
        return migrator
    }

    // MARK: downloads

    /// Records (or refreshes) a downloaded item: its description, file, image and the user's
    /// data as the server has it now.
    @discardableResult
    public func record(_ item: JellyfinItem, account: OfflineAccount, filePath: String, fileBytes: Int64, image: [UInt8]? = nil,
                       at date: Date = Date()) throws(OfflineError) -> OfflineEntry {
        var imagePath: String?
        if let image, !image.isEmpty {
            let target = imagesFolder + "/" + Self.safeFileName(account.serverId) + "-" + Self.safeFileName(item.id) + Self.imageExtension(image)
            try Self.writeAtomically(image, to: target, folder: imagesFolder)
            imagePath = target
        }
        let detail = StoredItem(item).json
        let data = item.userData ?? UserItemData()
        try write { db in
            try db.execute(sql: """
                INSERT OR REPLACE INTO item (server_id, user_id, item_id, server_name, user_name, name, kind, detail, file_path, file_bytes,
                    image_path, downloaded_at, server_position_ticks, server_played, server_play_count, server_last_played)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [account.serverId, account.userId, item.id, account.serverName, account.userName, item.name, item.kind.rawValue,
                                 detail, filePath, fileBytes, imagePath, date, data.playbackPositionTicks, data.played, data.playCount,
                                 data.lastPlayedDate])
        }
        guard let entry = try entry(itemId: item.id, serverId: account.serverId, userId: account.userId) else {
            throw .storage("the item just recorded is not there")
        }
        return entry
    }

    /// Every download, in the order a library shows them: films and series by name, episodes by
    /// season and number, tracks by disc and number.
    public func entries() throws(OfflineError) -> [OfflineEntry] {
        let rows = try read { db in try Row.fetchAll(db, sql: Self.selectEntries) }
        return rows.compactMap(Self.entry(from:)).sorted(by: Self.libraryOrder)
    }

    /// One download.
    public func entry(itemId: String, serverId: String, userId: String) throws(OfflineError) -> OfflineEntry? {
        let row = try read { db in
            try Row.fetchOne(db, sql: Self.selectEntries + " WHERE item.server_id = ? AND item.user_id = ? AND item.item_id = ?",
                             arguments: [serverId, userId, itemId])
        }
        return row.flatMap(Self.entry(from:))
    }

    /// The downloads `text` names: an item id, else items, series, seasons or albums of that
    /// name (case-insensitively); a series, season or album gives its downloaded episodes or
    /// tracks in order. An item name that several servers or users have downloaded is ambiguous.
    public func find(_ text: String) throws(OfflineError) -> [OfflineEntry] {
        let all = try entries()
        let compact = text.replacingOccurrences(of: "-", with: "").lowercased()
        let byId = all.filter { $0.item.id.lowercased() == compact }
        if !byId.isEmpty { return Array(byId.prefix(1)) }
        func same(_ value: String?) -> Bool { value?.caseInsensitiveCompare(text) == .orderedSame }
        let byName = all.filter { same($0.item.name) }
        if byName.count > 1 {
            throw .ambiguous(text, candidates: byName.map { "\($0.item.name) [\($0.item.id)] on \($0.account.serverName) as \($0.account.userName)" })
        }
        if let one = byName.first { return [one] }
        let grouped = all.filter { same($0.item.seriesName) || same($0.item.seasonName) || same($0.item.album) }
        guard !grouped.isEmpty else { throw .notDownloaded(text) }
        return grouped
    }

    /// The downloads that follow `entry` in its series (for `--next`), in order.
    public func following(_ entry: OfflineEntry) throws(OfflineError) -> [OfflineEntry] {
        guard let series = entry.item.seriesId else { return [] }
        let episodes = try entries().filter { $0.item.seriesId == series && $0.account == entry.account }
        guard let at = episodes.firstIndex(where: { $0.item.id == entry.item.id }) else { return [] }
        return Array(episodes[(at + 1)...])
    }

    /// Forgets a download and deletes its file and image (pending progress is kept for sync).
    public func remove(_ entry: OfflineEntry, deleteFile: Bool = true) throws(OfflineError) {
        try write { db in
            try db.execute(sql: "DELETE FROM item WHERE server_id = ? AND user_id = ? AND item_id = ?",
                           arguments: [entry.account.serverId, entry.account.userId, entry.item.id])
        }
        if deleteFile { unlink(entry.filePath) }
        if let image = entry.imagePath { unlink(image) }
    }

    // MARK: progress

    /// Keeps where offline playback of an item is now (replacing what was kept before).
    public func saveProgress(itemId: String, account: OfflineAccount, positionTicks: Int64, finished: Bool,
                             at date: Date = Date()) throws(OfflineError) {
        try write { db in
            try db.execute(sql: """
                INSERT OR REPLACE INTO progress (server_id, user_id, item_id, position_ticks, finished, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [account.serverId, account.userId, itemId, max(0, positionTicks), finished, date])
        }
    }

    /// The progress made offline for one server and user, oldest first.
    public func pendingProgress(serverId: String, userId: String) throws(OfflineError) -> [OfflineProgress] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM progress WHERE server_id = ? AND user_id = ? ORDER BY updated_at",
                             arguments: [serverId, userId]).map(Self.progress(from:))
        }
    }

    /// Whether any progress waits for this server and user (cheap: for every command that
    /// reaches the server).
    public func hasPendingProgress(serverId: String, userId: String) throws(OfflineError) -> Bool {
        try read { db in
            try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM progress WHERE server_id = ? AND user_id = ?)", arguments: [serverId, userId]) ?? false
        }
    }

    /// After a sync: the progress is settled (sent, or older than the server's), and the
    /// server's user data as it is now is kept for the item.
    func settle(_ progress: OfflineProgress, serverId: String, userId: String, server data: UserItemData?) throws(OfflineError) {
        try write { db in
            // Only the row that was synced: playback saved meanwhile stays pending.
            try db.execute(sql: "DELETE FROM progress WHERE server_id = ? AND user_id = ? AND item_id = ? AND updated_at = ?",
                           arguments: [serverId, userId, progress.itemId, progress.updatedAt])
            if let data {
                try db.execute(sql: """
                    UPDATE item SET server_position_ticks = ?, server_played = ?, server_play_count = ?, server_last_played = ?
                    WHERE server_id = ? AND user_id = ? AND item_id = ?
                    """, arguments: [data.playbackPositionTicks, data.played, data.playCount, data.lastPlayedDate, serverId, userId, progress.itemId])
            }
        }
    }

    // MARK: rows

    private static let selectEntries = """
        SELECT item.*, progress.position_ticks AS p_position, progress.finished AS p_finished, progress.updated_at AS p_updated
        FROM item LEFT JOIN progress
          ON progress.server_id = item.server_id AND progress.user_id = item.user_id AND progress.item_id = item.item_id
        """

    private static func entry(from row: Row) -> OfflineEntry? {
        guard let stored = StoredItem(json: row["detail"]) else { return nil }
        let account = OfflineAccount(serverId: row["server_id"], serverName: row["server_name"], userId: row["user_id"], userName: row["user_name"])
        var item = stored.item(id: row["item_id"], name: row["name"], kind: ItemKind(rawValue: row["kind"]))
        let data = UserItemData(played: row["server_played"], playbackPositionTicks: row["server_position_ticks"], playCount: row["server_play_count"],
                                lastPlayedDate: row["server_last_played"])
        item.userData = data
        var pending: OfflineProgress?
        if let ticks: Int64 = row["p_position"], let updated: Date = row["p_updated"] {
            pending = OfflineProgress(itemId: item.id, positionTicks: ticks, finished: row["p_finished"] ?? false, updatedAt: updated)
        }
        return OfflineEntry(account: account, item: item, filePath: row["file_path"], fileBytes: row["file_bytes"], imagePath: row["image_path"],
                            downloadedAt: row["downloaded_at"], serverData: data, pending: pending)
    }

    private static func progress(from row: Row) -> OfflineProgress {
        OfflineProgress(itemId: row["item_id"], positionTicks: row["position_ticks"], finished: row["finished"], updatedAt: row["updated_at"])
    }

    static func libraryOrder(_ a: OfflineEntry, _ b: OfflineEntry) -> Bool {
        func key(_ e: OfflineEntry) -> (String, Int, Int, String) {
            let group = (e.item.seriesName ?? e.item.album ?? e.item.name).lowercased()
            return (group, e.item.parentIndexNumber ?? 0, e.item.indexNumber ?? 0, e.item.name.lowercased())
        }
        return key(a) < key(b)
    }

    private func read<T>(_ body: (Database) throws -> T) throws(OfflineError) -> T {
        do { return try pool.read(body) } catch { throw .storage(LocalDatabase.reason(error)) }
    }

    private func write<T>(_ body: (Database) throws -> T) throws(OfflineError) -> T {
        do { return try pool.write(body) } catch { throw .storage(LocalDatabase.reason(error)) }
    }

    // MARK: files

    static func safeFileName(_ text: String) -> String {
        String(text.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "_" }.prefix(64))
    }

    /// `.jpg`, `.png`, `.webp` or `.img`, from the image's first bytes.
    static func imageExtension(_ bytes: [UInt8]) -> String {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return ".jpg" }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return ".png" }
        if bytes.count >= 12, bytes.starts(with: Array("RIFF".utf8)), Array(bytes[8..<12]) == Array("WEBP".utf8) { return ".webp" }
        return ".img"
    }

    static func writeAtomically(_ bytes: [UInt8], to path: String, folder: String) throws(OfflineError) {
        if mkdir(folder, 0o755) != 0 && errno != EEXIST {
            throw .storage("cannot make \(folder): \(String(cString: strerror(errno)).lowercased())")
        }
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .storage("cannot write \(temporary): \(String(cString: strerror(errno)).lowercased())") }
        #if canImport(Glibc)
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        #else
        let written = bytes.withUnsafeBytes { Darwin.write(fd, $0.baseAddress, $0.count) }
        #endif
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw .storage("cannot write \(path): \(String(cString: strerror(errno)).lowercased())")
        }
    }
}

/// The item fields kept in the index's `detail` column (JSON): what listing, ordering, grouping
/// and playing need. New fields decode as nil from older rows.
struct StoredItem: Codable {
    var serverId: String?
    var parentId: String?
    var seriesName: String?
    var seriesId: String?
    var seasonId: String?
    var seasonName: String?
    var album: String?
    var albumId: String?
    var albumArtist: String?
    var artists: [String]?
    var indexNumber: Int?
    var parentIndexNumber: Int?
    var productionYear: Int?
    var runTimeTicks: Int64?
    var overview: String?
    var genres: [String]?
    var officialRating: String?
    var container: String?
    var mediaType: String?
    var path: String?
    var fileSize: Int64?

    init(_ item: JellyfinItem) {
        serverId = item.serverId
        parentId = item.parentId
        seriesName = item.seriesName
        seriesId = item.seriesId
        seasonId = item.seasonId
        seasonName = item.seasonName
        album = item.album
        albumId = item.albumId
        albumArtist = item.albumArtist
        artists = item.artists
        indexNumber = item.indexNumber
        parentIndexNumber = item.parentIndexNumber
        productionYear = item.productionYear
        runTimeTicks = item.runTimeTicks
        overview = item.overview
        genres = item.genres
        officialRating = item.officialRating
        container = item.container
        mediaType = item.mediaType
        path = item.path
        fileSize = item.fileSize
    }

    init?(json: String) {
        guard let value = try? JSONDecoder().decode(StoredItem.self, from: Data(json.utf8)) else { return nil }
        self = value
    }

    var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    func item(id: String, name: String, kind: ItemKind) -> JellyfinItem {
        var item = JellyfinItem(id: id, name: name, kind: kind, serverId: serverId, parentId: parentId, seriesName: seriesName, seriesId: seriesId,
                                seasonId: seasonId, seasonName: seasonName, album: album, albumId: albumId, albumArtist: albumArtist,
                                artists: artists ?? [], indexNumber: indexNumber, parentIndexNumber: parentIndexNumber,
                                productionYear: productionYear, runTimeTicks: runTimeTicks, overview: overview, genres: genres ?? [],
                                officialRating: officialRating, container: container, mediaType: mediaType, path: path)
        item.fileSize = fileSize
        return item
    }
}
