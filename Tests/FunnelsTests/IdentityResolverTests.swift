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
        #expect(IdentityResolver.person(of: "d1", links: links) == "u1")
        #expect(IdentityResolver.person(of: "d2", links: links) == "u1")
        #expect(IdentityResolver.person(of: "d3", links: links) == "d3")
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

    @Test("an alias joins its previous id, anonymous or a user, to its user, and persons follow links to their end")
    func aliasesJoinPersons() {
        let links = IdentityResolver.links(from: [
            // A device signs in as u-old; a server-side alias names another device.
            IdentityObservation(anonymousId: "d1", userId: "u-old", timestamp: 1),
            .alias(previousId: "d2", userId: "u-old", timestamp: 2),
            // The user is renamed: u-old is u-new from then on.
            .alias(previousId: "u-old", userId: "u-new", timestamp: 3),
            // A device first seen with another user stays theirs, alias or not.
            IdentityObservation(anonymousId: "d3", userId: "other", timestamp: 4),
            .alias(previousId: "d3", userId: "u-new", timestamp: 5),
        ])
        #expect(IdentityResolver.personId(anonymousId: "d1", userId: nil, links: links) == "u-new")
        #expect(IdentityResolver.personId(anonymousId: "d2", userId: nil, links: links) == "u-new")
        #expect(IdentityResolver.personId(anonymousId: "d1", userId: "u-old", links: links) == "u-new")
        #expect(IdentityResolver.personId(anonymousId: "d3", userId: nil, links: links) == "other")
        #expect(IdentityResolver.personId(anonymousId: nil, userId: "u-new", links: links) == "u-new")
        #expect(IdentityResolver.persons(of: links) == ["d1": "u-new", "d2": "u-new", "u-old": "u-new", "d3": "other"])
    }

    @Test("ids aliased to each other are one person: the loop's latest link is not followed, whatever the order")
    func aliasLoops() {
        let observations: [IdentityObservation] = [
            .alias(previousId: "a", userId: "b", timestamp: 1),
            .alias(previousId: "b", userId: "c", timestamp: 2),
            .alias(previousId: "c", userId: "a", timestamp: 3),
            IdentityObservation(anonymousId: "d", userId: "a", timestamp: 4),
            .alias(previousId: "e", userId: "e", timestamp: 5),
        ]
        for order in [observations, observations.reversed(), [observations[2], observations[0], observations[4], observations[3], observations[1]]] {
            let links = IdentityResolver.links(from: order)
            for id in ["a", "b", "c", "d"] { #expect(IdentityResolver.person(of: id, links: links) == "c", "\(id)") }
            #expect(IdentityResolver.person(of: "e", links: links) == "e")
            #expect(Set(IdentityResolver.persons(of: links).values) == ["c", "e"])
        }
    }
}
