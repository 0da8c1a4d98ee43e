"""The soundtrack of the omni families: their audio args, the audio plan of a video, its samples.

An omni family (Qwen2.5-Omni, Qwen3-Omni, Nemotron-Omni, MiniCPM-o) mixes :class:`AudioMixin`
into its adapter and names its audio front end (``encoder``: a
:class:`naru_eval.media.audio_plan.AudioEncoder`). The mixin gives it:

- the input plan: the frames unless ``video=false``, the soundtrack
  (:class:`naru_eval.core.inputs.AudioInput`, ``delivery="samples"``) when ``audio=true``, so the
  provenance's input mode is ``video+audio``, ``video`` or ``audio`` with nothing else said;
- the preflight (:meth:`AudioMixin.check_audio`): before the first answer every video of the
  run is opened for its audio track, and a silent or undecodable one stops the run with all of
  them named (``naru-eval validate-data --audio`` is the same check, earlier);
- the plan of each video (:meth:`AudioMixin.audio_plan`): the whole track when frames and audio
  fit the model's context (its config's ``max_position_embeddings``), else windows centred on
  the sampled frames, else a refusal of that video with the numbers
  (:mod:`naru_eval.media.audio_plan`); audio only (``video=false``) takes the very windows the
  frames would have had, so an ablation's two arms hear the same audio;
- the samples (:meth:`AudioMixin.soundtrack`) from the one audio sampler through the audio cache;
  with ``audio_source=other`` another video's soundtrack (the ablation's control: a fixed
  derangement of the run's videos, :func:`naru_eval.media.audio_plan.derangement`, whose
  fingerprint is in the run key);
- its part of the run key (:meth:`AudioMixin.audio_description`) and each answer's record of
  what it heard (:meth:`AudioMixin.audio_usage`: seconds, tokens, coverage, windows), which the
  response store keeps with the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, TypedDict

from pydantic import Field

from naru_eval.adapters.args import ANSWERS, AudioFields, Flag, HFArgs
from naru_eval.adapters.request import Answer, NaruRequest, RequestFailed
from naru_eval.core import provenance
from naru_eval.core.inputs import AudioInput, FramesInput, InputPlan
from naru_eval.core.json_types import JSONObject
from naru_eval.media.audio_plan import AudioRecord

if TYPE_CHECKING:
    from lmms_eval.api.instance import Instance

    from naru_eval.media.audio import SampledAudio
    from naru_eval.media.audio_plan import AudioEncoder, AudioPlan
    from naru_eval.media.sampler import SampledFrames


class AudioArgs(HFArgs, AudioFields):
    """Args of an omni family: the transformers families' and the soundtrack's."""


class AudioOffArgs(AudioArgs):
    """An omni family with an official NARU row, which ran frames only: audio is off by default."""

    audio: Flag = Field(
        False,
        description="give the model the video's soundtrack (off: the official row's setting)",
        json_schema_extra=ANSWERS,
    )


class AudioHeard(AudioRecord, total=False):
    """What one answer heard: its plan's record, the seconds its windows cover, and (with
    ``audio_source=other``) the video the soundtrack came from."""

    covered_s: float
    from_video: str


class AudioUsage(TypedDict):
    """An omni answer's usage part: what it heard."""

    audio: AudioHeard


class AudioMixin:
    """The soundtrack machinery of an omni adapter (the module docstring); mixed in before
    ``HFVideoModel``."""

    #: the family's audio front end (token count per clip, block length)
    encoder: ClassVar[AudioEncoder]
    inputs: InputPlan
    model_id: ClassVar[str]
    #: video -> the video whose soundtrack it is given (``audio_source=other``), set by prepare
    _audio_from: dict[str, str]
    #: a video's frames (``media.sampler.frames_key``) -> its plan (the same for all the questions
    #: asked with those frames: every question of the video, unless frames are chosen per question)
    _audio_plans: dict[str, AudioPlan]
    #: what the adapter gives: the language model's context, and what the frames cost in it
    #: (audio only plans as if they were given)
    context_tokens: Callable[[], int]
    frame_tokens_of: Callable[[SampledFrames], int]

    def __init__(self, **model_args: object) -> None:
        self._audio_from = {}
        self._audio_plans = {}
        #: video -> what its answers heard (the processor may run ahead, in another thread)
        self._audio_records: dict[str, AudioUsage] = {}
        super().__init__(**model_args)

    def respond(self, request: NaruRequest) -> Answer:
        """The answer, with what it heard in its usage (the response store keeps it)."""
        return self.with_audio_usage(request, super().respond(request))  # type: ignore[misc]

    def with_audio_usage(self, request: NaruRequest, ans: Answer) -> Answer:
        """``ans`` with what its video's soundtrack gave in its usage."""
        if ans.usage is None:
            return ans
        record = self._audio_records.get(request.video or "")
        usage: dict[str, object] = {**ans.usage, **(record or {})}
        if not self.gives_frames:
            usage["frames"] = 0  # sampled for their times only
        video_id = request.doc.get("video_id")
        if record and video_id:  # every payload of the video's questions says what they heard
            provenance.record_video(str(video_id), audio=provenance.audio_summary(record["audio"]))
        return ans._replace(usage=usage)

    def to_naru_requests(self, requests: Sequence[Instance]) -> list[NaruRequest]:
        reqs: list[NaruRequest] = super().to_naru_requests(requests)  # type: ignore[misc]
        self.derange(reqs)
        self.recall_audio(reqs)
        return reqs

    def recall_audio(self, requests: Sequence[NaruRequest]) -> None:
        """What the answers already in the response store heard, for their payloads' ``audio``
        (an answer reused is not asked again, so its record comes from the store)."""
        store = getattr(self, "store", None)
        if store is None or not self.gives_audio:
            return
        done: set[str] = set()
        for r in requests:
            video_id = str(r.doc.get("video_id") or "")
            if not r.video or not video_id or video_id in done:
                continue
            hit = store.get(*self.request_key(r))  # type: ignore[attr-defined]
            if hit is not None and hit.status == "ok" and isinstance((hit.usage or {}).get("audio"), dict):
                provenance.record_video(video_id, audio=provenance.audio_summary(hit.usage["audio"]))
                done.add(video_id)

    def prepare(self, requests: Sequence[NaruRequest]) -> None:
        self.check_audio(requests)
        super().prepare(requests)  # type: ignore[misc]

    def audio_encoder(self) -> AudioEncoder:
        """The family's audio front end (an adapter whose model is the user's chooses it per run)."""
        return self.encoder

    @property
    def audio_args(self) -> AudioFields:
        """The adapter's args (with the soundtrack's fields, :class:`AudioFields`)."""
        args = self.args  # type: ignore[attr-defined]
        assert isinstance(args, AudioFields)
        return args

    def audio_input(self) -> AudioInput | None:
        a = self.audio_args
        if not a.audio:
            return None
        return AudioInput(delivery="samples", source=a.audio_source, window_s=a.audio_window_s, stream=a.audio_stream)

    def input_plan(self) -> InputPlan:
        """The frames unless ``video=false``, the soundtrack when ``audio=true`` (one of the two)."""
        a = self.audio_args
        if not a.video and not a.audio and getattr(self, "transcripts", None) is None:
            raise ValueError(f"{self.model_id}: video=false and audio=false leave the model nothing of the video")
        frames = FramesInput(self.sampling, delivery="video") if a.video else None  # type: ignore[attr-defined]
        return InputPlan(frames=frames, audio=self.audio_input())

    @property
    def gives_frames(self) -> bool:
        return self.inputs.frames is not None

    @property
    def gives_audio(self) -> bool:
        return self.inputs.audio is not None

    # -- before the first answer ----------------------------------------------------------------
    def derange(self, requests: Sequence[NaruRequest]) -> None:
        """With ``audio_source=other``: the derangement of every video of the run (all its requests,
        answered before or not, so a resumed run hears what the first pass heard; its fingerprint
        is in the run key)."""
        from naru_eval.media.audio_plan import derangement
        from naru_eval.media.video import probe_video

        self._audio_from = {}
        if not self.gives_audio or self.audio_args.audio_source != "other":
            return
        durations: dict[str, float] = {}
        for r in requests:
            if r.video and r.video not in durations:
                durations[r.video] = r.duration_s or probe_video(r.video, check_end=False).duration_s
        self._audio_from = derangement(durations)

    def check_audio(self, requests: Sequence[NaruRequest]) -> None:
        """Every video of ``requests`` (the ones to answer) has a decodable audio track, or the run
        stops here with all the silent ones named."""
        from naru_eval.media.audio import probe_audio
        from naru_eval.media.video import VideoError

        self._audio_plans = {}
        if not self.gives_audio:
            return
        videos = sorted({self.audio_path(r.video) for r in requests if r.video})
        problems = []
        for v in videos:
            try:
                probe_audio(v, self.audio_args.audio_stream)
            except VideoError as e:
                problems.append(str(e))
        if problems:
            listed = "\n  - ".join(problems)
            raise ValueError(
                f"{self.model_id}: audio=true, and {len(problems)} of the run's {len(videos)} videos have no usable "
                f"audio track (nothing was run; run with audio=false, or fix the files):\n  - {listed}"
            )

    # -- per video ----------------------------------------------------------------------------
    def audio_reserve(self) -> int:
        """Tokens kept free for the prompt and the answer (a reasoning family adds its budget)."""
        return int(self.audio_args.audio_reserve_tokens) + int(getattr(self, "reasoning_max_new_tokens", None) or 0)

    def audio_plan(self, sampled: SampledFrames, video_tokens: int) -> AudioPlan:
        """The plan of the video ``sampled`` is from, beside ``video_tokens`` of frames (0 for audio
        only: then the frames' windows, so both arms of an ablation hear the same audio)."""
        from naru_eval.media.audio_plan import AudioPlanError, plan_audio
        from naru_eval.media.sampler import frames_key

        video = sampled.info.path
        key = frames_key(sampled)  # the windows follow the frames (chosen per question with select=)
        if key in self._audio_plans:
            return self._audio_plans[key]
        budget = self.context_tokens() - self.audio_reserve()
        if self.gives_frames:
            budget -= video_tokens
        else:
            budget -= self.frame_tokens_of(sampled)
        try:
            plan = plan_audio(
                self.audio_encoder(),
                float(sampled.info.duration_s),
                [float(t) for t in sampled.timestamps],
                budget,
                video=video,
                window_s=self.audio_args.audio_window_s,
            )
        except AudioPlanError as e:
            raise RequestFailed(f"audio: {e}") from None
        self._audio_plans[key] = plan
        return plan

    def audio_path(self, video: str) -> str:
        """Whose soundtrack ``video`` gets: its own, or the control's other video."""
        if self.audio_args.audio_source == "other":
            other = self._audio_from.get(video)
            if other is None:
                raise RequestFailed(f"audio_source=other: {video} was not among the run's videos")
            return other
        return video

    def soundtrack(self, sampled: SampledFrames, video_tokens: int) -> tuple[SampledAudio, AudioPlan]:
        """The samples of the video's plan, from the audio cache (a decode failure fails the request)."""
        from naru_eval.media.audio_cache import default_audio_cache
        from naru_eval.media.video import VideoError

        plan = self.audio_plan(sampled, video_tokens)
        try:
            audio = default_audio_cache().get(
                self.audio_path(sampled.info.path), plan.windows, stream=self.audio_args.audio_stream
            )
        except VideoError as e:
            raise RequestFailed(f"audio: {e}") from None
        return audio, plan

    # -- what was given -----------------------------------------------------------------------
    def audio_description(self) -> JSONObject:
        """The run key's audio part: what changes what the model hears (the plan's inputs, the
        front end, the control's derangement)."""
        from naru_eval.media.audio import CONVERSION, SAMPLE_RATE
        from naru_eval.media.audio_plan import derangement_key

        a = self.audio_args
        if not a.audio:
            return {}  # frames only: the run key of a family's frames-only runs, as before audio existed
        return {
            "audio": True,
            "video": a.video,
            "audio_sampler": {"rate": SAMPLE_RATE, "conversion": CONVERSION, "stream": a.audio_stream},
            "audio_plan": {
                "encoder": self.audio_encoder().name,
                "block_s": self.audio_encoder().block_s,
                "window_s": a.audio_window_s,
                "reserve_tokens": self.audio_reserve(),
            },
            "audio_source": a.audio_source,
            "derangement": derangement_key(self._audio_from) if a.audio_source == "other" else None,
        }

    def audio_usage(self, audio: SampledAudio, plan: AudioPlan) -> AudioUsage:
        """What one answer heard (kept with it in the response store)."""
        record: AudioHeard = {**plan.record(), "covered_s": round(float(sum(audio.covered_s)), 3)}
        if self.audio_args.audio_source == "other":
            record["from_video"] = audio.path
        return {"audio": record}
