import { useEffect, useRef, useState } from "preact/hooks";

/**
 * A bar chart drawn as SVG by the app itself: no charting dependency (uPlot would add 51 KB minified to a
 * 71 KB bundle, Chart.js about 200 KB), nothing fetched, no inline styles (the CSP's style-src 'self':
 * colours come from styles.css classes). It is drawn at the box's real width (a ResizeObserver), so its
 * text keeps its size on a phone. Each bar is a <rect class="bar"> with data-date and data-value, and a
 * <title> that a pointer or a screen reader can read; the caller gives a text summary beside it.
 */
export interface Bar {
  /** The bar's key, e.g. "2026-11-25"; shown under the axis through `label`. */
  key: string;
  value: number;
  /** What the bar's tooltip says, e.g. "25 Nov: KES 1,200.00 (3 payments)". */
  title: string;
}

const HEIGHT = 220;
const PAD = { top: 12, right: 8, bottom: 26, left: 56 };

/** 1, 2 or 5 times a power of ten: a step that gives at most `count` gridlines up to `max`. */
function niceStep(max: number, count: number): number {
  const rough = max / count;
  const power = 10 ** Math.floor(Math.log10(rough));
  return ([1, 2, 5, 10].find((f) => f * power >= rough) ?? 10) * power;
}

export function BarChart({
  bars,
  label,
  axisLabel,
  tickLabel,
  id,
}: {
  bars: Bar[];
  /** The chart's accessible name. */
  label: string;
  /** A bar's key as shown under the axis ("25 Nov"). */
  axisLabel: (key: string) => string;
  /** A gridline's value as shown beside it ("1.2k"). */
  tickLabel: (value: number) => string;
  id?: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(640);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const measure = () => setWidth(Math.max(240, Math.floor(element.clientWidth)));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(element);
    return () => observer.disconnect();
  }, []);

  const plotWidth = width - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const max = Math.max(0, ...bars.map((bar) => bar.value));
  const step = max > 0 ? niceStep(max, 4) : 1;
  const top = max > 0 ? Math.ceil(max / step) * step : 4;
  const ticks = Array.from({ length: Math.round(top / step) + 1 }, (_, i) => i * step);
  const slot = plotWidth / Math.max(1, bars.length);
  const barWidth = Math.max(1, slot * 0.72);
  const y = (value: number) => PAD.top + plotHeight - (value / top) * plotHeight;
  // An axis label every few bars, as many as fit (about 56 px each), always including the last (today).
  const every = Math.max(1, Math.ceil(56 / slot));

  return (
    <div class="chart" ref={box} id={id}>
      <svg width={width} height={HEIGHT} viewBox={`0 0 ${width} ${HEIGHT}`} role="img" aria-label={label}>
        <g class="grid-lines">
          {ticks.map((tick) => (
            <g key={tick}>
              <line x1={PAD.left} x2={width - PAD.right} y1={y(tick)} y2={y(tick)} />
              <text x={PAD.left - 6} y={y(tick)} dy="0.32em" text-anchor="end" class="tick">
                {tickLabel(tick)}
              </text>
            </g>
          ))}
        </g>
        <g class="bars">
          {bars.map((bar, i) => {
            const x = PAD.left + i * slot + (slot - barWidth) / 2;
            // A day with something gets at least a sliver, so it is not mistaken for an empty one.
            const height = bar.value > 0 ? Math.max(2, y(0) - y(bar.value)) : 0;
            return (
              <g key={bar.key} class="slot">
                <title>{bar.title}</title>
                {/* The whole column answers the pointer, so an empty day shows its tooltip too. */}
                <rect class="hit" x={PAD.left + i * slot} y={PAD.top} width={slot} height={plotHeight} />
                <rect class="bar" data-date={bar.key} data-value={bar.value} x={x} y={y(0) - height} width={barWidth} height={height} />
              </g>
            );
          })}
        </g>
        <g class="axis">
          {bars.map((bar, i) =>
            (bars.length - 1 - i) % every === 0 ? (
              <text key={bar.key} x={Math.min(PAD.left + i * slot + slot / 2, width - 2)} y={HEIGHT - 8} text-anchor={PAD.left + i * slot + slot / 2 + 22 > width ? "end" : "middle"} class="tick">
                {axisLabel(bar.key)}
              </text>
            ) : null,
          )}
        </g>
      </svg>
    </div>
  );
}
