from modeler.listing import listing


def test_names_at_most_the_first_items_and_counts_the_rest():
    assert listing(["a", "b"], 3) == "a, b"
    assert listing(["a", "b", "c"], 3) == "a, b, c"
    assert listing(["a", "b", "c", "d", "e"], 3) == "a, b, c and 2 more"
    assert listing(["x", "y"], 1, "more file(s)") == "x and 1 more file(s)"
