import type { ComponentChildren } from "preact";
import { useLayoutEffect, useRef } from "preact/hooks";
import { ErrorNote, useAction } from "./ui.tsx";

/**
 * A form in a card: its title (which names the form), its fields, then the error of the last submit and the
 * submit button (with Cancel where the form can be closed). A submit runs `onSubmit` as one action: the button
 * is disabled meanwhile, and a failure is shown above it.
 */
export function CardForm({
  title,
  titleId,
  id,
  autoComplete,
  submit,
  onSubmit,
  onCancel,
  alternative,
  status,
  children,
}: {
  title: string;
  titleId: string;
  id?: string;
  autoComplete?: string;
  submit: string;
  onSubmit: () => Promise<unknown>;
  onCancel?: () => void;
  /** A second way to send the form (e.g. "Save draft" beside "Submit"), run as the same action. */
  alternative?: { label: string; run: () => Promise<unknown> };
  /** Shown under the error once a submit went through, e.g. a role="status" confirmation. */
  status?: ComponentChildren;
  children: ComponentChildren;
}) {
  const action = useAction();
  return (
    <form
      class="card form"
      id={id}
      onSubmit={(event) => {
        event.preventDefault();
        void action.run(onSubmit);
      }}
      aria-labelledby={titleId}
      autoComplete={autoComplete}
    >
      <h2 id={titleId}>{title}</h2>
      {children}
      <ErrorNote message={action.error} />
      {status}
      <div class="row">
        <button type="submit" disabled={action.busy}>
          {submit}
        </button>
        {alternative && (
          <button type="button" class="secondary" disabled={action.busy} onClick={() => void action.run(alternative.run)}>
            {alternative.label}
          </button>
        )}
        {onCancel && (
          <button type="button" class="secondary" onClick={onCancel}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}

/**
 * A ref for the field that takes focus when its form opens. In a layout effect, in the same task as the form's
 * first render: an effect runs after the next paint, and when that came late (a busy machine) it took the focus
 * from the field the user had already clicked into and was typing in.
 */
export function useFocusOnMount<T extends HTMLElement>() {
  const ref = useRef<T>(null);
  useLayoutEffect(() => ref.current?.focus(), []);
  return ref;
}
