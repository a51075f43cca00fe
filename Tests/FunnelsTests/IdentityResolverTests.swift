import Testing
@testable import Funnels

@Suite struct IdentityResolverTests {
    @Test func userIdWinsAndAnonymousIdsMerge() {
        let links = IdentityResolver.links(from: [
            IdentityObservation(anonymousId: "d1", userId: nil, timestamp: 1),
            IdentityObservation(anonymousId: "d1", userId: "u1", timestamp: 5),
            IdentityObservation(anonymousId: "d2", userId: "u1", timestamp: 7),
            IdentityObservation(anonymousId: "d3", userId: nil, timestamp: 8),
        ])
        #expect(IdentityResolver.resolve(personFor: "d1", links: links) == "u1")
        #expect(IdentityResolver.resolve(personFor: "d2", links: links) == "u1")
        #expect(IdentityResolver.resolve(personFor: "d3", links: links) == "d3")
        #expect(IdentityResolver.personId(anonymousId: "d1", userId: nil, links: links) == "u1")
        #expect(IdentityResolver.personId(anonymousId: "d3", userId: "u7", links: links) == "u7")
        #expect(IdentityResolver.personId(anonymousId: nil, userId: nil, links: links) == nil)
    }

    @Test func earliestUserWinsRegardlessOfOrder() {
        let observations = [
            IdentityObservation(anonymousId: "d", userId: "late", timestamp: 50),
            IdentityObservation(anonymousId: "d", userId: "early", timestamp: 10),
            IdentityObservation(anonymousId: "d", userId: "late", timestamp: 60),
        ]
        #expect(IdentityResolver.links(from: observations)["d"] == IdentityLink(userId: "early", firstSeen: 10))
        #expect(IdentityResolver.links(from: observations.reversed())["d"] == IdentityLink(userId: "early", firstSeen: 10))
    }

    @Test func tiesGoToSmallestUserId() {
        let observations = [
            IdentityObservation(anonymousId: "d", userId: "zed", timestamp: 10),
            IdentityObservation(anonymousId: "d", userId: "amy", timestamp: 10),
        ]
        #expect(IdentityResolver.links(from: observations)["d"]?.userId == "amy")
        #expect(IdentityResolver.links(from: observations.reversed())["d"]?.userId == "amy")
    }

    @Test func recordReportsWhenThePersonChanges() {
        var links: [String: IdentityLink] = [:]
        #expect(IdentityResolver.record(IdentityObservation(anonymousId: "d", userId: "b", timestamp: 20), into: &links))
        #expect(!IdentityResolver.record(IdentityObservation(anonymousId: "d", userId: "c", timestamp: 30), into: &links))
        // Same user seen earlier: link updated, person unchanged.
        #expect(!IdentityResolver.record(IdentityObservation(anonymousId: "d", userId: "b", timestamp: 15), into: &links))
        #expect(links["d"] == IdentityLink(userId: "b", firstSeen: 15))
        // A late event shows an earlier user: the device moves to that person.
        #expect(IdentityResolver.record(IdentityObservation(anonymousId: "d", userId: "a", timestamp: 5), into: &links))
        #expect(links["d"]?.userId == "a")
        #expect(!IdentityResolver.record(IdentityObservation(anonymousId: nil, userId: "a", timestamp: 1), into: &links))
    }
}
