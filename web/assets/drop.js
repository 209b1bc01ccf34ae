// Drag-and-drop for the upload form: files dropped anywhere on the page go
// into the form's file field and the form is sent, as if chosen by hand.
// The form works the same without it.
(function () {
	var form = document.getElementById("upload-form");
	var input = document.getElementById("file");
	if (!form || !input) return;
	var body = document.body;
	form.classList.add("droppable");
	var over = function (e) { e.preventDefault(); body.classList.add("dropping"); };
	body.addEventListener("dragenter", over);
	body.addEventListener("dragover", over);
	body.addEventListener("dragleave", function (e) {
		if (!e.relatedTarget || !body.contains(e.relatedTarget)) body.classList.remove("dropping");
	});
	body.addEventListener("drop", function (e) {
		e.preventDefault();
		body.classList.remove("dropping");
		if (!e.dataTransfer || !e.dataTransfer.files.length) return;
		input.files = e.dataTransfer.files;
		form.submit();
	});
})();
