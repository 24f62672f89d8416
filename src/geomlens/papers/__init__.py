"""What the papers' authors published: their numbers as data (``published``), looked up
for the nearest published model beside a run's own."""
