"""Media: video probing, frame sampling and the frame cache (av, numpy); imports no other naru_eval layer."""
