import Testing
@testable import Jellyfin

/// Ratings compared by the youngest age they admit (the live listing is IntegrationTests'
/// JellyfinCLITests.aRatingCeilingHidesWhatIsAboveIt).
struct RatingCeilingTests {
    @Test func ratingsReadAsAges() {
        #expect(RatingCeiling.age(of: "G") == 0 && RatingCeiling.age(of: "pg-13") == 13 && RatingCeiling.age(of: "TV-MA") == 17)
        #expect(RatingCeiling.age(of: "FSK-12") == 12 && RatingCeiling.age(of: "DE-16") == 16 && RatingCeiling.age(of: "UK:15") == 15)
        #expect(RatingCeiling.age(of: "12+") == 12 && RatingCeiling.age(of: "18") == 18)
        for unknown in ["", "Banana", "Approved for everyone over 9000", "99"] { #expect(RatingCeiling.age(of: unknown) == nil, "\(unknown)") }
    }

    @Test func theCeilingAllowsWhatIsAtOrBelowIt() throws {
        let pg13 = try #require(RatingCeiling("PG-13"))
        #expect(pg13.allows("PG") && pg13.allows("TV-PG") && pg13.allows("PG-13") && pg13.allows("FSK-12"))
        #expect(!pg13.allows("R") && !pg13.allows("TV-14") && !pg13.allows("16"))
        #expect(pg13.allows(nil) && pg13.allows("Something New"), "unrated and unknown ratings pass")
        #expect(pg13.serverRating == "PG-13")
        #expect(RatingCeiling("12")?.serverRating == "PG", "an age asks the server for the US rating under it")
        #expect(RatingCeiling("banana") == nil)
    }
}
